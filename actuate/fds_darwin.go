package actuate

// closeInheritedFDs marks every descriptor from 3 up close-on-exec (macOS
// has no close_range): one fcntl per entry of /dev/fd. Compile-checked only.
func closeInheritedFDs() error {
	return cloexecListed("/dev/fd")
}
