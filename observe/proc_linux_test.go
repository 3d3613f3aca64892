package observe

import (
	"os"
	"testing"
)

func TestBootID(t *testing.T) {
	id, err := BootID()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(bootIDPath)
	if err != nil {
		t.Fatal(err)
	}
	if want := string(raw[:len(raw)-1]); id != want || len(id) != 36 {
		t.Errorf("BootID() = %q, want %q (a UUID)", id, want)
	}
}
