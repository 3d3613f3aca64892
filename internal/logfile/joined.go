package logfile

import (
	"errors"
	"io"
)

// part is one file of a log read as one stream with the others: a rotated
// copy or the live file, with the size it had when it was opened.
type part struct {
	r    io.ReaderAt
	size int64
}

// joined reads parts (oldest first) as one stream. A rotated copy can begin
// and end in the middle of a line; joined, the parts hold the lines whole.
type joined []part

func (j joined) size() int64 {
	var n int64
	for _, p := range j {
		n += p.size
	}
	return n
}

// ReadAt reads the joined stream; it reads no part beyond its size.
func (j joined) ReadAt(b []byte, off int64) (int, error) {
	read := 0
	for _, p := range j {
		if len(b) == 0 {
			break
		}
		if off >= p.size {
			off -= p.size
			continue
		}
		n := int(min(int64(len(b)), p.size-off))
		m, err := p.r.ReadAt(b[:n], off)
		read += m
		if err != nil && !errors.Is(err, io.EOF) {
			return read, err
		}
		if m < n {
			return read, io.ErrUnexpectedEOF // the part shrank
		}
		b, off = b[n:], 0
	}
	if len(b) > 0 {
		return read, io.EOF
	}
	return read, nil
}

// locate maps an offset of the joined stream to a part and an offset in it;
// the end of the stream is the end of the last part.
func (j joined) locate(off int64) (int, int64) {
	for i, p := range j {
		if off < p.size || i == len(j)-1 {
			return i, off
		}
		off -= p.size
	}
	return 0, 0
}
