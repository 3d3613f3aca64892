package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"time"

	"github.com/procfleet/procfleet/internal/logfile"
)

// streamWriteTimeout bounds one event's write: a page that stops reading
// is dropped, never waited on.
const streamWriteTimeout = 10 * time.Second

// fleetEvents streams the fleet page's updates.
func (d *Dashboard) fleetEvents(w http.ResponseWriter, r *http.Request) {
	var fr fleetRender
	d.stream(w, r, func(context.Context) frames {
		return fr.frames(d.cfg.Backend.Snapshot())
	}, nil)
}

// serverEvents streams a server page's updates and its log.
func (d *Dashboard) serverEvents(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	v, ok := d.serverView(r.Context(), name)
	if !ok {
		http.NotFound(w, r)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var logs chan []string
	if v.Detail.LogPath != "" {
		logs = make(chan []string, 16)
		go d.followLog(ctx, v.Detail.LogPath, logs)
	}
	first := true
	d.stream(w, r.WithContext(ctx), func(ctx context.Context) frames {
		if first { // the view gathered above is still fresh
			first = false
			return serverFrames(v)
		}
		v, _ := d.serverView(ctx, name)
		return serverFrames(v)
	}, logs)
}

// stream sends a page its state as a patch, then a patch after each
// change (at most one per MinInterval), and log lines as they come, until
// the page goes away. It waits on the Backend's change channel: a page
// with nothing changing costs nothing but a heartbeat.
func (d *Dashboard) stream(w http.ResponseWriter, r *http.Request, frame func(context.Context) frames, logs <-chan []string) {
	select {
	case d.streams <- struct{}{}:
		defer func() { <-d.streams }()
	default:
		http.Error(w, "too many dashboard pages are open", http.StatusServiceUnavailable)
		return
	}
	ctx := r.Context()
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	var buf bytes.Buffer
	send := func(event string, data any) bool {
		buf.Reset()
		if event != "" {
			buf.WriteString("event: " + event + "\ndata: ")
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false) // HTML fragments: <, > and & as they are
			if err := enc.Encode(data); err != nil {
				d.cfg.Log.Error(err, "Cannot encode an update")
				return false
			}
			buf.WriteByte('\n') // Encode ended the data line; this ends the event
		} else {
			buf.WriteString(": ping\n\n")
		}
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if _, err := w.Write(buf.Bytes()); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	// A reconnecting page (after a restart of up) waits 2 s between tries.
	if _, err := w.Write([]byte("retry: 2000\n\n")); err != nil {
		return
	}
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	var diff differ
	// waitLogs waits for ctx, until (nil: for ever) or a change, sending log
	// lines and heartbeats meanwhile. It reports false when the page is gone.
	waitLogs := func(until <-chan time.Time, changed <-chan struct{}) bool {
		for {
			select {
			case <-ctx.Done():
				return false
			case <-until:
				return true
			case <-changed:
				return true
			case lines, ok := <-logs:
				if !ok {
					logs = nil
					continue
				}
				event := "log"
				if lines == nil {
					event, lines = "logreset", []string{}
				}
				if !send(event, lines) {
					return false
				}
			case <-beat.C:
				if !send("", nil) {
					return false
				}
			}
		}
	}
	for {
		changed := d.cfg.Backend.Changed() // before the snapshot: no change is missed
		if p := diff.next(frame(ctx)); !p.empty() {
			if !send("patch", p) {
				return
			}
		}
		// Let the changes of the next MinInterval gather into one update.
		// The wait is one timer, not a wake-up per change: on a busy fleet
		// a page costs one wake-up per update.
		t := time.NewTimer(d.cfg.MinInterval)
		ok := waitLogs(t.C, nil)
		t.Stop()
		if !ok {
			return
		}
		select {
		case <-changed:
			continue
		default:
		}
		if !waitLogs(nil, changed) {
			return
		}
	}
}

// followRetry is how soon a log that could not be followed is tried
// again (also at each change of the fleet).
const followRetry = 5 * time.Second

// followLog sends the lines of a server's log to out as they are written,
// starting with the last LogLines, until ctx ends. Each time it starts
// following it first sends a nil batch: the page then clears what it
// shows, so a retry never shows a line twice. A log that does not exist
// yet, or that cannot be followed, is tried again at each change of the
// fleet and every followRetry.
func (d *Dashboard) followLog(ctx context.Context, path string, out chan<- []string) {
	defer close(out)
	for {
		changed := d.cfg.Backend.Changed()
		if _, err := os.Stat(path); err == nil {
			select {
			case out <- nil:
			case <-ctx.Done():
				return
			}
			lw := &lineWriter{ctx: ctx, out: out}
			err := logfile.Follow(ctx, path, lw, logfile.FollowOptions{Lines: d.cfg.LogLines, Log: d.cfg.Log})
			lw.flush()
			if ctx.Err() != nil {
				return
			}
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				d.cfg.Log.V(1).Info("Cannot follow a log; trying again", "path", path, "error", err.Error())
			}
		}
		t := time.NewTimer(followRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// lineWriter cuts what Follow writes into lines, each cleaned for showing,
// and sends them in batches.
type lineWriter struct {
	ctx     context.Context
	out     chan<- []string
	partial []byte
}

// maxPartial bounds a line still waiting for its newline.
const maxPartial = 64 << 10

func (lw *lineWriter) Write(p []byte) (int, error) {
	var lines []string
	data := p
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		line := data[:i]
		if len(lw.partial) > 0 {
			line = append(lw.partial, line...)
			lw.partial = lw.partial[:0]
		}
		lines = append(lines, cleanLogLine(string(bytes.TrimSuffix(line, []byte{'\r'}))))
		data = data[i+1:]
	}
	lw.partial = append(lw.partial, data...)
	if len(lw.partial) > maxPartial {
		lines = append(lines, cleanLogLine(string(lw.partial)))
		lw.partial = lw.partial[:0]
	}
	if len(lines) > 0 {
		select {
		case lw.out <- lines:
		case <-lw.ctx.Done():
			return 0, lw.ctx.Err()
		}
	}
	return len(p), nil
}

// flush sends a last line that had no newline.
func (lw *lineWriter) flush() {
	if len(lw.partial) == 0 {
		return
	}
	select {
	case lw.out <- []string{cleanLogLine(string(lw.partial))}:
	case <-lw.ctx.Done():
	}
	lw.partial = nil
}
