package harness

import (
	"os"
	"sync"
	"testing"
)

// NeedReal skips t when the machine cannot run real daemons on FUSE (not
// root, no reference binary) and fails it when buildErr, the error of
// building the binaries (Build), is set. CI is root with sanlock
// installed, so these tests run there. what names the tests in the skip
// notice.
func NeedReal(t testing.TB, what string, buildErr error) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip(what + " needs root (FUSE mounts, sanlock daemons)")
	}
	if _, err := os.Stat(DefaultCBinary); err != nil {
		t.Skip("no reference sanlock binary")
	}
	if buildErr != nil {
		t.Fatalf("build: %v", buildErr)
	}
}

// TestCluster makes a cluster of opts (its Logf set to log into t until
// the test ends) that is closed at cleanup; its work directory is kept,
// and named in the log, when the test failed.
func TestCluster(t testing.TB, opts Options) *Cluster {
	t.Helper()
	var mu sync.Mutex
	done := false
	opts.Logf = func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			t.Logf(format, args...)
		}
	}
	c, err := NewCluster(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.Keep()
			t.Logf("work directory kept: %s", c.Dir)
		}
		if err := c.Close(); err != nil {
			t.Errorf("close cluster: %v", err)
		}
		mu.Lock()
		done = true
		mu.Unlock()
	})
	return c
}
