package lease_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/lease"
)

// TestAgainstDaemons runs the blocking acquire, try-acquire, fencing token
// and the loss notices against our daemon and sanlock 3.8.5.
func TestAgainstDaemons(t *testing.T) {
	for kind, start := range daemonKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			testLeaseAPI(t, start(t))
		})
	}
}

func testLeaseAPI(t *testing.T, d *testDaemon) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := lease.Config{RunDir: d.runDir,
		Lockspace: &lease.Lockspace{Name: "LS", HostID: 1, Path: d.leases, IOTimeout: 1}}
	// A fresh join: NewSession returns once the lockspace is joined.
	start := time.Now()
	s1, err := lease.NewSession(ctx, cfg)
	if err != nil {
		t.Fatalf("NewSession (join): %v", err)
	}
	t.Logf("%s: fresh join took %.1fs", d.name, time.Since(start).Seconds()) // logged, not asserted
	defer s1.Close()
	if err := d.client().InqLockspace(context.Background(), &client.Lockspace{Name: "LS", HostID: 1, Disk: client.Disk{Path: d.leases}}, 0); err != nil {
		t.Fatalf("lockspace not joined after NewSession: %v", err)
	}
	// A second session of the same process shares the joined lockspace.
	s2, err := lease.NewSession(ctx, cfg)
	if err != nil {
		t.Fatalf("NewSession (joined): %v", err)
	}
	defer s2.Close()

	r1 := lease.Resource{Name: "R1", Path: d.leases, Offset: 1 * mib}
	a, b := s1.Lease(r1), s2.Lease(r1)

	// The first acquire right after the join may meet IDLIVE: Acquire
	// retries it.
	if err := a.Acquire(ctx); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	tokA := a.Token()
	if tokA == 0 {
		t.Fatal("Token 0 after Acquire")
	}

	// Try-acquire while held: ErrLocked with the owner.
	err = b.TryAcquire(ctx)
	var locked *lease.LockedError
	if !errors.Is(err, lease.ErrLocked) || !errors.As(err, &locked) {
		t.Fatalf("TryAcquire while held = %v, want *LockedError", err)
	}
	if locked.OwnerHostID != 1 || locked.OwnerGeneration == 0 {
		t.Errorf("LockedError owner = host_id %d generation %d, want host 1 and a generation",
			locked.OwnerHostID, locked.OwnerGeneration)
	}
	var ce *client.Error
	if !errors.As(err, &ce) {
		t.Errorf("LockedError does not unwrap to *client.Error: %v", err)
	}

	// A blocking acquire whose context ends while the lease is held.
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	err = b.Acquire(short)
	cancelShort()
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, lease.ErrLocked) {
		t.Fatalf("Acquire with expiring ctx = %v, want DeadlineExceeded and ErrLocked", err)
	}

	// A blocking acquire that succeeds once the holder releases.
	var released atomic.Bool
	got := make(chan error, 1)
	go func() { got <- b.Acquire(ctx) }()
	time.Sleep(200 * time.Millisecond) // let it meet the holder at least once
	released.Store(true)
	if err := a.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("blocking Acquire: %v", err)
	}
	if !released.Load() {
		t.Fatal("blocking Acquire returned before the holder released")
	}
	// The fencing token grows with every exclusive holding.
	if b.Token() <= tokA {
		t.Errorf("token after handover = %d, want > %d", b.Token(), tokA)
	}
	if a.Token() != 0 {
		t.Errorf("Token of a released lease = %d, want 0", a.Token())
	}
	if err := a.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("second Release = %v, want ErrNotHeld", err)
	}

	// Loss notice: another host asks for R1 (graceful). The holder's
	// Lost() closes with ReasonRequested, no signal reaches this process,
	// and the session gives the lease back so that the requester can get it.
	tokB := b.Token()
	requestAt(d.client(), "LS", d.leases, "R1", 1*mib)
	select {
	case <-b.Lost():
	case <-time.After(30 * time.Second):
		t.Fatal("no loss notice after a graceful request")
	}
	var lost *lease.LostError
	if !errors.As(b.Err(), &lost) || !errors.Is(b.Err(), lease.ErrLost) || lost.Reason != lease.ReasonRequested {
		t.Fatalf("Err after loss = %v, want LostError with ReasonRequested", b.Err())
	}
	if lost.Token != tokB {
		t.Errorf("LostError.Token = %d, want %d", lost.Token, tokB)
	}
	if lost.RequestedBy != 0 {
		t.Errorf("LostError.RequestedBy = %d for a request made on this host, want 0", lost.RequestedBy)
	}
	if err := a.Acquire(ctx); err != nil {
		t.Fatalf("Acquire after the lost lease was given back: %v", err)
	}
	if a.Token() <= tokB {
		t.Errorf("token after loss = %d, want > %d", a.Token(), tokB)
	}
	if err := b.Release(ctx); err != nil {
		t.Errorf("Release of a lost lease = %v, want nil", err)
	}

	// Shared mode: two shared holders at once, exclusive refused.
	sh := lease.Resource{Name: "R2", Path: d.leases, Offset: 2 * mib, Shared: true}
	if err := s1.Lease(sh).Acquire(ctx); err != nil {
		t.Fatalf("shared Acquire 1: %v", err)
	}
	if err := s2.Lease(sh).Acquire(ctx); err != nil {
		t.Fatalf("shared Acquire 2: %v", err)
	}
	ex := lease.Resource{Name: "R2", Path: d.leases, Offset: 2 * mib}
	s3, err := lease.NewSession(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if err := s3.Lease(ex).TryAcquire(ctx); !errors.Is(err, lease.ErrLocked) {
		t.Errorf("exclusive TryAcquire over shared holders = %v, want ErrLocked", err)
	}

	// A hard error is returned at once, not retried: no lease at 3.5 MiB.
	bad := s3.Lease(lease.Resource{Name: "R9", Path: d.leases, Offset: 3*mib + mib/2})
	if err := bad.Acquire(ctx); err == nil || errors.Is(err, lease.ErrLocked) || ctx.Err() != nil {
		t.Errorf("Acquire of a missing lease = %v, want a hard error", err)
	} else if !errors.Is(err, lease.ErrNoLease) {
		t.Logf("missing lease: %v", err) // the code differs by daemon
	}

	// Daemon gone: every session ends and held leases are lost.
	d.kill()
	select {
	case <-s1.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("Done not closed after the daemon died")
	}
	if !errors.As(s1.Err(), &lost) || lost.Reason != lease.ReasonDaemonGone {
		t.Errorf("session Err = %v, want ReasonDaemonGone", s1.Err())
	}
	<-a.Lost()
	if !errors.As(a.Err(), &lost) || lost.Reason != lease.ReasonDaemonGone {
		t.Errorf("lease Err = %v, want ReasonDaemonGone", a.Err())
	}
}

// TestSessionDoneOnRemove: removing the lockspace ends the session.
func TestSessionDoneOnRemove(t *testing.T) {
	d := inprocDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := lease.NewSession(ctx, lease.Config{RunDir: d.runDir,
		Lockspace: &lease.Lockspace{Name: "LS", HostID: 2, Path: d.leases, IOTimeout: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ls := &client.Lockspace{Name: "LS", HostID: 2, Disk: client.Disk{Path: d.leases}}
	if err := d.client().RemLockspace(context.Background(), ls, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	case <-ctx.Done():
		t.Fatal("Done not closed after rem_lockspace")
	}
	var lost *lease.LostError
	if !errors.As(s.Err(), &lost) || lost.Reason != lease.ReasonLockspaceRemoved {
		t.Errorf("Err = %v, want ReasonLockspaceRemoved", s.Err())
	}
}

// TestJoinCancelled: a join cut short by its context returns the context's
// error and is undone.
func TestJoinCancelled(t *testing.T) {
	d := inprocDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := lease.NewSession(ctx, lease.Config{RunDir: d.runDir,
		Lockspace: &lease.Lockspace{Name: "LS", HostID: 3, Path: d.leases, IOTimeout: 1}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("NewSession with a short ctx = %v, want DeadlineExceeded", err)
	}
	// The add is undone: eventually no lockspace is listed.
	cl := d.client()
	for i := 0; ; i++ {
		lss, err := cl.GetLockspaces(context.Background())
		if err == nil && len(lss) == 0 {
			break
		}
		if i > 300 {
			t.Fatalf("lockspace still listed after a cancelled join: %v %v", lss, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestClassify: every result code maps to exactly one sentinel, and the
// retryable ones are those meaning "someone else has it".
func TestClassify(t *testing.T) {
	for _, c := range []int{-243, -244, -245, -246, -247, -212, -213, -11, -16} {
		if lease.Classify("acquire", c) != lease.ErrLocked {
			t.Errorf("Classify(%d) = %v, want ErrLocked", c, lease.Classify("acquire", c))
		}
	}
	want := map[int]error{
		-28: lease.ErrLockspaceNotJoined, -223: lease.ErrNoLease, -229: lease.ErrCorrupt,
		-202: lease.ErrStorage, -240: lease.ErrVersion, -262: lease.ErrHostIDBusy,
		-117: lease.ErrOrphan, -22: lease.ErrInvalid, -111: lease.ErrDaemonUnavailable,
		-201: lease.ErrDaemon,
	}
	for c, w := range want {
		if got := lease.Classify("acquire", c); got != w {
			t.Errorf("Classify(%d) = %v, want %v", c, got, w)
		}
	}
	if lease.Classify("release", -2) != lease.ErrNotHeld || lease.Classify("join", -2) != lease.ErrLockspaceNotJoined {
		t.Error("ENOENT not classified by operation")
	}
	if lease.Classify("", 0) != nil {
		t.Error("Classify(0) != nil")
	}
	for c := -300; c < 0; c++ {
		if lease.Classify("acquire", c) == nil {
			t.Errorf("Classify(%d) = nil", c)
		}
	}
}
