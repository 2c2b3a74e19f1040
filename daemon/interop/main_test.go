package interop

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
)

// TestMain keeps SIGTERM from ending the test binary. Many tests register
// this process as a lease holder with an in-process daemon, and the daemon's
// recovery sends its holders SIGTERM when a lockspace fails or is removed
// with leases still held: on a loaded machine (io_timeout 1, race detector,
// other test binaries running) a renewal can fail after the test that
// watched for the signal has stopped watching, and the default action would
// kill every test in the package. Tests that wait for the signal
// (client.Reg.WatchRevocations) still get it: Go delivers it to every
// channel registered for it.
func TestMain(m *testing.M) {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM)
	go func() {
		for range sigs {
			fmt.Fprintln(os.Stderr, "interop tests: SIGTERM received (a daemon's recovery signalled this test process); ignored")
		}
	}()
	os.Exit(m.Run())
}
