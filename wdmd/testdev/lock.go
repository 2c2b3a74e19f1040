package testdev

import (
	"os"

	"golang.org/x/sys/unix"
)

// RunDirLock is the file that tests lock while they run a wdmd on the
// fixed socket path /run/wdmd/wdmd.sock (the path the C sanlock uses), so
// that test processes never run two such daemons at once.
const RunDirLock = "/run/wdmd.gosanlock-test.lock"

// LockRunDir takes RunDirLock (waiting for other test processes) and
// returns the function that releases it.
func LockRunDir() (unlock func(), err error) {
	f, err := os.OpenFile(RunDirLock, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { _ = f.Close() }, nil
}
