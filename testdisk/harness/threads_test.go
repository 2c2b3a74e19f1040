package harness_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/testdisk/fusefault"
	"github.com/gosanlock/gosanlock/testdisk/harness"
)

func procThreads(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return -1
	}
	return len(ents)
}

// TestHungStorageThreads: the storage of every lockspace
// of our daemon hangs (every request held, as under dmsetup suspend) at
// io_timeout 1. Renewals keep timing out, but the daemon's OS threads stay
// bounded: native AIO holds no thread per hung request (before, each
// timed-out read left one thread stuck in the kernel, 6 -> 38 threads in
// 70 s with one lockspace). The hang lasts $GOSANLOCK_HANG_SECONDS
// (default 12; the case is 70) over $GOSANLOCK_HANG_LOCKSPACES
// lockspaces (default 10; bound 32 threads, 16 for one lockspace).
func TestHungStorageThreads(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	n := envInt("GOSANLOCK_HANG_LOCKSPACES", 10)
	hang := time.Duration(envInt("GOSANLOCK_HANG_SECONDS", 12)) * time.Second
	for i := range n {
		if err := c.InitLockspace(fmt.Sprintf("f%d", i), fmt.Sprintf("lt%d", i), ioTimeout); err != nil {
			t.Fatal(err)
		}
	}
	h, err := c.AddHost(harness.Go, "thr")
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, n)
	for i := range n { // joined at once: each join waits a few io_timeouts
		go func() { errs <- h.AddLockspace(fmt.Sprintf("lt%d", i), 1, fmt.Sprintf("f%d", i), ioTimeout) }()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	pid := h.Daemon().PID()
	base := procThreads(pid)
	h.SetFault(fusefault.Fault{Mode: fusefault.Hang})
	peak := base
	for end := time.Now().Add(hang); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		peak = max(peak, procThreads(pid))
	}
	during := procThreads(pid)
	hung := h.FS.Stats().Hung
	h.SetFault(fusefault.Fault{})
	time.Sleep(3 * time.Second)
	after := procThreads(pid)
	t.Logf("%d lockspaces, storage hung %v at io_timeout %d: threads %d before, peak %d, %d at the end of the hang, %d after; %d requests reached the hung storage",
		n, hang, ioTimeout, base, peak, during, after, hung)
	limit := 32
	if n == 1 {
		limit = 16
	}
	if peak > limit {
		t.Errorf("peak threads %d > %d", peak, limit)
	}
}
