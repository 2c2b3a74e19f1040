package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

var sanlockBin struct {
	once sync.Once
	path string
	err  error
}

// SanlockBinary is our sanlock binary for tests that run it as a process:
// $GOSANLOCK_TEST_SANLOCK when set (make test passes the bin/sanlock it
// built), resolved to an absolute path without symlinks (tests compare it
// with /proc/PID/exe); else one built once per test binary.
func SanlockBinary(t testing.TB) string {
	t.Helper()
	sanlockBin.once.Do(func() {
		if p := os.Getenv("GOSANLOCK_TEST_SANLOCK"); p != "" {
			if sanlockBin.path, sanlockBin.err = filepath.Abs(p); sanlockBin.err == nil {
				sanlockBin.path, sanlockBin.err = filepath.EvalSymlinks(sanlockBin.path)
			}
			return
		}
		dir, err := os.MkdirTemp("", "gsbin")
		if err != nil {
			sanlockBin.err = err
			return
		}
		sanlockBin.path = filepath.Join(dir, "sanlock")
		out, err := exec.Command("go", "build", "-o", sanlockBin.path, "github.com/gosanlock/gosanlock/cmd/sanlock").CombinedOutput()
		if err != nil {
			sanlockBin.err = fmt.Errorf("%v: %s", err, out)
		}
	})
	require.NoError(t, sanlockBin.err)
	return sanlockBin.path
}
