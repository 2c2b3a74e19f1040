package testdisk

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/diskio"
)

// loopLockPath serialises losetup across test processes: `go test ./...`
// runs packages in parallel, and two concurrent `losetup -f` calls can pick
// the same free device, so one of them fails.
var loopLockPath = filepath.Join(os.TempDir(), "gosanlock-losetup.lock")

// withLoopLock runs fn holding the cross-process losetup lock.
func withLoopLock(t testing.TB, fn func()) {
	t.Helper()
	f, err := os.OpenFile(loopLockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("loop lock: %v", err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatalf("loop lock: %v", err)
	}
	defer unix.Flock(int(f.Fd()), unix.LOCK_UN)
	fn()
}

// Loop attaches a loop device over the file backing with the given logical
// sector size (512 or 4096), checks the size the device reports, and
// detaches it at cleanup. It skips the test when not running as root (CI
// is root, so these tests run there); any other failure fails the test.
func Loop(t testing.TB, backing string, sector int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loop devices need root")
	}
	args := []string{"-f", "--show"}
	if sector != diskfmt.SectorSize512 {
		args = append(args, "--sector-size", "4096")
	}
	var dev string
	var out []byte
	var err error
	withLoopLock(t, func() {
		for try := 0; try < 5; try++ {
			out, err = exec.Command("losetup", append(args, backing)...).CombinedOutput()
			if err == nil {
				dev = strings.TrimSpace(string(out))
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	if dev == "" {
		t.Fatalf("losetup %v %s: %v: %s", args, backing, err, out)
	}
	t.Cleanup(func() {
		withLoopLock(t, func() {
			if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
				t.Logf("losetup -d %s: %v %s", dev, err, out)
			}
		})
	})
	d, err := diskio.OpenFile(dev)
	if err != nil {
		t.Fatalf("open %s: %v", dev, err)
	}
	defer d.Close()
	if d.SectorSize() != sector {
		t.Fatalf("%s reports %d-byte sectors, want %d", dev, d.SectorSize(), sector)
	}
	return dev
}
