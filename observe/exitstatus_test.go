package observe

import "testing"

func TestExitStatusString(t *testing.T) {
	tests := []struct {
		st   ExitStatus
		want string
	}{
		{ExitStatus{Code: 0}, "exited with code 0"},
		{ExitStatus{Code: 3}, "exited with code 3"},
		{ExitStatus{Code: -1, Signal: "SIGKILL", SignalNumber: 9}, "killed by signal 9 (SIGKILL)"},
		{ExitStatus{Code: -1, Signal: "SIGSEGV", SignalNumber: 11, CoreDumped: true}, "killed by signal 11 (SIGSEGV) (core dumped)"},
	}
	for _, tt := range tests {
		if got := tt.st.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.st, got, tt.want)
		}
	}
}
