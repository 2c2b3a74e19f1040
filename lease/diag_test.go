package lease_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/lease"
)

// TestInit: a lockspace and a resource lease prepared through the daemon
// can be joined and acquired at once; a second init of the same place is
// refused (ErrExists) unless Overwrite is set.
func TestInit(t *testing.T) {
	d := inprocDaemon(t)
	dir, err := os.MkdirTemp("/var/tmp", "leaseinit-") // not tmpfs: the daemon uses direct I/O
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "store")
	if err := os.WriteFile(path, make([]byte, 3*mib), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opt := lease.InitOptions{RunDir: d.runDir}
	ls := lease.Lockspace{Name: "NEW", HostID: 1, Path: path, IOTimeout: 1}
	if err := lease.InitLockspace(ctx, ls, opt); err != nil {
		t.Fatalf("InitLockspace: %v", err)
	}
	r := lease.Resource{Lockspace: "NEW", Name: "R", Path: path, Offset: 1 * mib}
	if err := lease.InitResource(ctx, r, opt); err != nil {
		t.Fatalf("InitResource: %v", err)
	}

	// Written already: refused, with the place and what is there.
	err = lease.InitLockspace(ctx, ls, opt)
	if !errors.Is(err, lease.ErrExists) || !strings.Contains(err.Error(), path+":0") ||
		!strings.Contains(err.Error(), "lockspace NEW") {
		t.Errorf("second InitLockspace = %v, want ErrExists naming %s:0 and lockspace NEW", err, path)
	}
	if err := lease.InitLockspace(ctx, lease.Lockspace{Name: "NEW", Path: path, Offset: 1 * mib}, opt); !errors.Is(err, lease.ErrExists) {
		t.Errorf("InitLockspace over a resource lease = %v, want ErrExists", err)
	}
	if err := lease.InitResource(ctx, lease.Resource{Lockspace: "NEW", Name: "X", Path: path}, opt); !errors.Is(err, lease.ErrExists) {
		t.Errorf("InitResource over the lockspace = %v, want ErrExists", err)
	}
	if err := lease.InitResource(ctx, lease.Resource{Name: "X", Path: path, Offset: 2 * mib}, opt); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("InitResource without a lockspace name = %v, want ErrInvalid", err)
	}
	if err := lease.InitResource(ctx, r, lease.InitOptions{RunDir: d.runDir, Overwrite: true}); err != nil {
		t.Errorf("InitResource with Overwrite: %v", err)
	}

	s, err := lease.NewSession(ctx, lease.Config{RunDir: d.runDir, Lockspace: &ls, LeaveOnClose: true})
	if err != nil {
		t.Fatalf("NewSession on the new lockspace: %v", err)
	}
	defer s.Close()
	l := s.Lease(lease.Resource{Name: "R", Path: path, Offset: 1 * mib})
	if err := l.Acquire(ctx); err != nil {
		t.Fatalf("Acquire of the new resource: %v", err)
	}
	if l.Token() == 0 {
		t.Error("Token 0")
	}
}

// TestNoDaemon: the error names the socket and says what is wrong.
func TestNoDaemon(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, client.SockName)
	ctx := context.Background()
	_, err := lease.NewSession(ctx, lease.Config{RunDir: dir})
	if !errors.Is(err, lease.ErrDaemonUnavailable) {
		t.Fatalf("NewSession without a daemon = %v, want ErrDaemonUnavailable", err)
	}
	want := "no daemon at " + sock + " (is sanlock running?)"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("NewSession error %q does not contain %q", err, want)
	}
	err = lease.InitLockspace(ctx, lease.Lockspace{Name: "LS", Path: "/nonexistent"}, lease.InitOptions{RunDir: dir})
	if !errors.Is(err, lease.ErrDaemonUnavailable) || !strings.Contains(err.Error(), want) {
		t.Errorf("InitLockspace without a daemon = %v, want ErrDaemonUnavailable and %q", err, want)
	}
}

// TestLocalHolder: a lease held by another process (here another session)
// of this host is reported with the holder's pid, the lease's file, and
// no repeated prefix; a blocking Acquire reports its retries.
func TestLocalHolder(t *testing.T) {
	d := inprocDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	var retries []lease.Retry
	cfg := lease.Config{RunDir: d.runDir,
		Lockspace: &lease.Lockspace{Name: "LS", HostID: 4, Path: d.leases, IOTimeout: 1},
		OnRetry: func(r lease.Retry) {
			mu.Lock()
			retries = append(retries, r)
			mu.Unlock()
		}}
	s1, err := lease.NewSession(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	s2, err := lease.NewSession(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	r1 := lease.Resource{Name: "R1", Path: d.leases, Offset: 1 * mib}
	if err := s1.Lease(r1).Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	pid := os.Getpid()
	place := d.leases + ":1048576"

	err = s2.Lease(r1).TryAcquire(ctx)
	var locked *lease.LockedError
	if !errors.As(err, &locked) || locked.Pid != pid {
		t.Fatalf("TryAcquire = %v, want *LockedError with Pid %d", err, pid)
	}
	msg := err.Error()
	for _, w := range []string{"process " + strconv.Itoa(pid) + " on this host", place, "EEXIST"} {
		if !strings.Contains(msg, w) {
			t.Errorf("TryAcquire error %q does not contain %q", msg, w)
		}
	}

	short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
	err = s2.Lease(r1).Acquire(short)
	cancelShort()
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, lease.ErrLocked) || !errors.As(err, &locked) {
		t.Fatalf("Acquire with expiring ctx = %v, want DeadlineExceeded, ErrLocked and *LockedError", err)
	}
	msg = err.Error()
	if strings.Count(msg, "lease:") != 1 || strings.Count(msg, "LS:R1") != 1 || strings.Count(msg, place) != 1 {
		t.Errorf("Acquire error repeats itself or lacks the place: %q", msg)
	}
	if !strings.Contains(msg, "process "+strconv.Itoa(pid)+" on this host") {
		t.Errorf("Acquire error %q does not name the holder", msg)
	}
	// A lockspace this host has not joined is named as such.
	err = s2.Lease(lease.Resource{Lockspace: "XX", Name: "R1", Path: d.leases, Offset: 1 * mib}).Acquire(ctx)
	if !errors.Is(err, lease.ErrLockspaceNotJoined) || !strings.Contains(err.Error(), "lockspace XX is not joined on this host") {
		t.Errorf("Acquire in a lockspace not joined = %v, want ErrLockspaceNotJoined naming XX", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(retries) == 0 {
		t.Fatal("OnRetry not called")
	}
	first := retries[0]
	if first.Lease != "LS:R1" || first.Attempt != 1 || first.Wait <= 0 || !errors.As(first.Err, &locked) || locked.Pid != pid {
		t.Errorf("first Retry = %+v, want LS:R1, attempt 1, a wait and the local holder", first)
	}
}

// TestQuietDaemonLog: a session's periodic checks leave no line in the
// daemon's log, and a session closed right after a loss notice (its
// release of the lost lease in flight) ends as a plain client exit.
func TestQuietDaemonLog(t *testing.T) {
	d := inprocDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := lease.NewSession(ctx, lease.Config{RunDir: d.runDir,
		Lockspace:    &lease.Lockspace{Name: "LS", HostID: 5, Path: d.leases, IOTimeout: 1},
		PollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	l := s.Lease(lease.Resource{Name: "R1", Path: d.leases, Offset: 1 * mib})
	if err := l.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // about 20 checks
	requestAt(d.client(), "LS", d.leases, "R1", 1*mib)
	select {
	case <-l.Lost():
	case <-ctx.Done():
		t.Fatal("no loss notice")
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	time.Sleep(200 * time.Millisecond)
	b, err := d.client().LogDump(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	// One STATUS is the notice's (the daemon ran the kill program).
	if n := strings.Count(log, "cmd_status"); n > 1 {
		t.Errorf("%d cmd_status lines in the daemon log, want at most 1:\n%s", n, log)
	}
	if strings.Contains(log, "bad message") {
		t.Errorf("the daemon logged a bad message at the session's close:\n%s", log)
	}
}
