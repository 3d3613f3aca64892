package actuate

import (
	"os"
	"testing"

	"github.com/procfleet/procfleet/internal/testserver"
)

func TestMain(m *testing.M) {
	testserver.RunIfHelper()
	os.Exit(m.Run())
}
