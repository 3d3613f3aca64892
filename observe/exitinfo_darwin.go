package observe

// macOS code is compile-checked only (GOOS=darwin go build / go vet).

// ExitStatus is always false on macOS: the kqueue NOTE_EXITSTATUS flag
// reports the status only to the process's parent, and there is no pidfd to
// ask after it was reaped.
func (h *Handle) ExitStatus() (ExitStatus, bool) { return ExitStatus{}, false }
