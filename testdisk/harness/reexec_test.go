package harness_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/testdisk/harness"
)

// TestReexecWatchdog: our daemon with -w 1 and our wdmd on the emulated
// watchdog device (firing 10 s after its last ping) holds a lease in an
// io_timeout 10 lockspace and reexecs five times, then once into a binary
// that exits at start and once into one that sends garbage (both fail,
// the same image serves on): the device never fires (through two more
// renewals after the last reexec), the lease (lver included) is unchanged
// and the wdmd session continues (docs/upgrade.md "Adopting wdmd sessions").
func TestReexecWatchdog(t *testing.T) {
	t.Parallel()
	needReal(t)
	// The daemon runs from its own copy of our binary: the failed
	// reexecs below install broken binaries at its path.
	good, err := os.ReadFile(goSanlock)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "sanlock")
	install := func(b []byte) {
		t.Helper()
		if err := os.WriteFile(bin+".new", b, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(bin+".new", bin); err != nil {
			t.Fatal(err)
		}
	}
	install(good)
	c := harness.TestCluster(t, harness.Options{GoBinary: bin})
	wdmdBin, _, err := harness.BuildEscalation(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const ls = "lsx"
	// io_timeout 10: the lockspace's expiry (L + 80 s) must be beyond
	// wdmd's 60 s fire timeout, or wdmd stops pinging at once, reexec or
	// not (docs/wdmd.md).
	if err := c.InitLockspace("ls", ls, 10); err != nil {
		t.Fatal(err)
	}
	if err := c.InitResource("res", ls, "r", 8); err != nil {
		t.Fatal(err)
	}
	h, err := c.AddHostWith(harness.Go, "x1go", harness.HostOptions{
		SanlockConf: "watchdog_fire_timeout = 10\n",
		Watchdog:    &harness.WatchdogOptions{WdmdBinary: wdmdBin, FireAfter: 10 * time.Second, TestInterval: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	pidOf := func() int {
		b, _ := os.ReadFile(filepath.Join(h.RunDir, "sanlock.pid"))
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
	t.Cleanup(func() {
		if p := pidOf(); p > 0 {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	})
	if err := h.AddLockspace(ls, 1, "ls", 10); err != nil {
		t.Fatal(err)
	}
	reg, err := h.Client().Register(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if err := reg.Acquire(context.Background(), []client.Resource{h.Resource(ls, "r", "res")}, 0, nil); err != nil {
		t.Fatal(err)
	}
	inq, err := reg.Inquire(context.Background())
	state := inq.State
	if err != nil {
		t.Fatal(err)
	}
	fired := func() bool {
		select {
		case <-h.Watchdog().Fired():
			return true
		default:
			return false
		}
	}
	for i := 0; i < 5; i++ {
		old := pidOf()
		if err := syscall.Kill(old, syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for pidOf() == old {
			if time.Now().After(deadline) {
				t.Fatalf("reexec %d: pid %d still serves", i, old)
			}
			time.Sleep(10 * time.Millisecond)
		}
		inq, err := reg.Inquire(context.Background())
		got := inq.State
		if err != nil || got != state {
			t.Fatalf("reexec %d: inquire %q %v, want %q", i, got, err, state)
		}
		if fired() {
			t.Fatalf("reexec %d: the watchdog fired", i)
		}
		time.Sleep(time.Duration(i) * 700 * time.Millisecond)
	}
	// Failed reexecs: into a binary that exits at start, and into one
	// that sends garbage on the control channel (fd 3) instead of READY.
	p := pidOf()
	for name, image := range map[string][]byte{
		"false":   []byte("#!/bin/sh\nexit 1\n"),
		"garbage": []byte("#!/bin/sh\nprintf garbage >&3\nsleep 1\n"),
	} {
		install(image)
		err := h.Client().Reexec(context.Background())
		if client.ErrorCode(err) == 0 || !strings.Contains(err.Error(), "failed at ready") {
			t.Fatalf("reexec into %s: %v", name, err)
		}
		if pidOf() != p {
			t.Fatalf("a failed reexec into %s changed the serving image", name)
		}
		if inq, err := reg.Inquire(context.Background()); err != nil || inq.State != state {
			t.Fatalf("after the reexec into %s: inquire %q %v, want %q", name, inq.State, err, state)
		}
		if fired() {
			t.Fatalf("reexec into %s: the watchdog fired", name)
		}
	}
	install(good)
	select {
	case <-h.Watchdog().Fired():
		t.Fatal("the watchdog fired")
	case <-time.After(45 * time.Second): // two renewals, each followed by wdmd's test

	}
	inq, err = reg.Inquire(context.Background())
	got := inq.State
	if err != nil || got != state {
		t.Fatalf("inquire %q %v, want %q", got, err, state)
	}
}
