package lease_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/internal/testenv"
	"github.com/gosanlock/gosanlock/internal/testutil"
	"github.com/gosanlock/gosanlock/lease"
	"github.com/gosanlock/gosanlock/testdisk/fusefault"
	"github.com/gosanlock/gosanlock/testdisk/harness"
)

// TestLossTwoHosts: host A's holder (this test process, through the lease
// API) holds R; A's lockspace storage fails (fault layer, lockspace file
// only). The holder gets Lost() with ReasonLockspaceFailed while it is
// still alive, i.e. before the daemon's SIGKILL (which would end this test
// process), and gives the lease back. Host B then acquires R with a larger
// token once A's host lease has timed out, and a toy store refuses a write
// with A's old token. Runs with A = ours / B = sanlock 3.8.5 and the other
// way round.
func TestLossTwoHosts(t *testing.T) {
	testenv.NeedRoot(t, "real daemons, with a FUSE fault layer under host A")
	goSanlock := testutil.SanlockBinary(t)
	kinds := [][2]harness.Kind{{harness.Go, harness.C}, {harness.C, harness.Go}}
	if _, err := os.Stat(realSanlock); err != nil {
		if testenv.InCI() {
			t.Fatalf("CI: %s missing", realSanlock)
		}
		kinds = [][2]harness.Kind{{harness.Go, harness.Go}}
	}
	for _, k := range kinds {
		t.Run(fmt.Sprintf("A=%s,B=%s", k[0], k[1]), func(t *testing.T) {
			t.Parallel()
			testLoss(t, goSanlock, k[0], k[1])
		})
	}
}

func testLoss(t *testing.T, goSanlock string, kindA, kindB harness.Kind) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, err := harness.NewCluster(harness.Options{GoBinary: goSanlock, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.Keep()
		}
		c.Close()
	})
	if err := c.InitLockspace("ls", "LS", 1); err != nil {
		t.Fatal(err)
	}
	if err := c.InitResource("res", "LS", "R", 8); err != nil {
		t.Fatal(err)
	}
	if err := c.InitResource("res2", "LS", "R2", 8); err != nil {
		t.Fatal(err)
	}
	a, err := c.AddHost(kindA, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.AddHost(kindB, "b")
	if err != nil {
		t.Fatal(err)
	}

	// Both join (concurrently: a fresh join takes a few seconds).
	type joined struct {
		s   *lease.Session
		err error
	}
	join := func(h *harness.Host, id uint64) <-chan joined {
		ch := make(chan joined, 1)
		go func() {
			s, err := lease.NewSession(ctx, lease.Config{RunDir: h.RunDir,
				Lockspace: &lease.Lockspace{Name: "LS", HostID: id, Path: h.Path("ls"), IOTimeout: 1}})
			ch <- joined{s, err}
		}()
		return ch
	}
	ja, jb := join(a, 1), join(b, 2)
	ra, rb := <-ja, <-jb
	if ra.err != nil || rb.err != nil {
		t.Fatalf("join: A %v, B %v", ra.err, rb.err)
	}
	sa, sb := ra.s, rb.s
	defer sa.Close()
	defer sb.Close()

	var st store
	var lost *lease.LostError
	var locked *lease.LockedError
	la := sa.Lease(lease.Resource{Name: "R", Path: a.Path("res")})
	if err := la.Acquire(ctx); err != nil {
		t.Fatalf("A acquire: %v", err)
	}
	tokA := la.Token()
	if err := st.Write(tokA, "from A"); err != nil {
		t.Fatal(err)
	}
	lb := sb.Lease(lease.Resource{Name: "R", Path: b.Path("res")})
	if err := lb.TryAcquire(ctx); !errors.Is(err, lease.ErrLocked) {
		t.Fatalf("B try-acquire while A holds = %v, want ErrLocked", err)
	} else if !errors.As(err, &locked) || locked.OwnerHostID != 1 {
		t.Errorf("B try-acquire while A holds = %v, want host_id 1", err)
	}

	// First a request from the other host: B asks for R2 (graceful), A's
	// daemon learns of it through B's lockspace lease and runs A's kill
	// program; A's holder sees Lost(requested), the session gives R2 back,
	// and B's blocking acquire gets it with a larger token.
	la2 := sa.Lease(lease.Resource{Name: "R2", Path: a.Path("res2")})
	if err := la2.Acquire(ctx); err != nil {
		t.Fatalf("A acquire R2: %v", err)
	}
	req := &client.Resource{LockspaceName: "LS", Name: "R2", Disks: []client.Disk{{Path: b.Path("res2")}}}
	if err := sb.Client().Request(ctx, req, client.RequestNextLVer, client.ForceGraceful); err != nil {
		t.Fatalf("B request R2: %v", err)
	}
	requested := time.Now()
	select {
	case <-la2.Lost():
	case <-ctx.Done():
		t.Fatal("A's holder got no notice of B's request")
	}
	if !errors.As(la2.Err(), &lost) || lost.Reason != lease.ReasonRequested {
		t.Fatalf("A's R2 Err = %v, want ReasonRequested", la2.Err())
	}
	t.Logf("A: %v, %.1fs after B's request", la2.Err(), time.Since(requested).Seconds())
	if lost.RequestedBy != 2 {
		t.Errorf("A's R2 LostError.RequestedBy = %d, want host_id 2 (B)", lost.RequestedBy)
	}
	lb2 := sb.Lease(lease.Resource{Name: "R2", Path: b.Path("res2")})
	if err := lb2.Acquire(ctx); err != nil {
		t.Fatalf("B acquire R2 after the request: %v", err)
	}
	if lb2.Token() <= lost.Token {
		t.Errorf("B's R2 token %d not larger than A's %d", lb2.Token(), lost.Token)
	}
	if la.Err() != nil {
		t.Fatalf("the request for R2 also took R: %v", la.Err())
	}

	// A's lockspace storage fails; its resource storage keeps working.
	a.SetFault(fusefault.Fault{Mode: fusefault.Error, File: "ls"})
	faulted := time.Now()
	select {
	case <-la.Lost():
	case <-ctx.Done():
		t.Fatal("A's holder got no loss notice")
	}
	if !errors.As(la.Err(), &lost) || lost.Reason != lease.ReasonLockspaceFailed {
		t.Fatalf("A's lease Err = %v, want ReasonLockspaceFailed", la.Err())
	}
	// Logged, not asserted (shared machine): the daemon runs the kill
	// program at 8*io_timeout after the last renewal, SIGKILL would follow
	// at 8*io_timeout+kill_grace_seconds (48 s here).
	t.Logf("A: %v, %.1fs after the fault", la.Err(), time.Since(faulted).Seconds())
	select {
	case <-sa.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("A's session not done after its lockspace failed")
	}
	if !errors.As(sa.Err(), &lost) || lost.Reason != lease.ReasonLockspaceFailed {
		t.Errorf("A's session Err = %v, want ReasonLockspaceFailed", sa.Err())
	}

	// While A's host lease has not timed out, B is told that A stopped
	// renewing (logged, not asserted: the state B's daemon has reached
	// depends on timing).
	if err := lb.TryAcquire(ctx); errors.As(err, &locked) {
		t.Logf("B try-acquire after A's failure: %v (owner state %q)", err, locked.OwnerState)
	} else {
		t.Logf("B try-acquire after A's failure: %v", err)
	}

	// B blocks until A's host lease has timed out, then takes R over.
	if err := lb.Acquire(ctx); err != nil {
		t.Fatalf("B acquire: %v", err)
	}
	tokB := lb.Token()
	if tokB <= tokA {
		t.Fatalf("B's token %d not larger than A's %d", tokB, tokA)
	}
	if err := st.Write(tokB, "from B"); err != nil {
		t.Fatalf("B's fenced write: %v", err)
	}
	if err := st.Write(tokA, "late write from A"); err == nil {
		t.Fatal("the store accepted A's old token after B's write")
	}
	if st.data != "from B" {
		t.Fatalf("store holds %q", st.data)
	}
	t.Logf("tokens: A %d, B %d (B acquired %.1fs after the fault); A's late write refused",
		tokA, tokB, time.Since(faulted).Seconds())
}
