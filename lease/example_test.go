package lease_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/gosanlock/gosanlock/lease"
)

// Lock a resource with a timeout, work, unlock. In the examples, leases is
// a file (or device) on shared storage holding lockspace LS at offset 0 and
// resource leases R1, R2, R3 at 1, 2 and 3 MiB, written with
// `sanlock direct init -o 1 -s LS:0:FILE:0` and `sanlock direct init -r LS:R1:FILE:1M`...
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Register with the local daemon and join lockspace LS as host 1
	// (waits until joined; returns at once when LS is already joined).
	s, err := lease.NewSession(ctx, lease.Config{
		Lockspace: &lease.Lockspace{Name: "LS", HostID: 1, Path: leases, IOTimeout: 1},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	mu := s.Mutex("R1", leases, 1<<20)
	lockCtx, cancelLock := context.WithTimeout(ctx, 10*time.Second)
	defer cancelLock()
	if err := mu.Lock(lockCtx); err != nil {
		log.Fatal(err) // ctx ended while another host held R1, or a hard error
	}
	fmt.Println("locked, token > 0:", mu.Token() > 0)
	if err := mu.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("unlocked")
	// Output:
	// locked, token > 0: true
	// unlocked
}

// TryAcquire fails at once with ErrLocked while someone else holds the
// lease, and says who.
func ExampleLease_TryAcquire() {
	ctx := context.Background()
	cfg := lease.Config{Lockspace: &lease.Lockspace{Name: "LS", HostID: 1, Path: leases, IOTimeout: 1}}
	holder, err := lease.NewSession(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer holder.Close()
	other, err := lease.NewSession(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer other.Close()

	r2 := lease.Resource{Name: "R2", Path: leases, Offset: 2 << 20}
	if err := holder.Lease(r2).Acquire(ctx); err != nil {
		log.Fatal(err)
	}

	err = other.Lease(r2).TryAcquire(ctx)
	var locked *lease.LockedError
	if errors.As(err, &locked) {
		fmt.Println("locked:", errors.Is(err, lease.ErrLocked), "owner host_id:", locked.OwnerHostID)
	}
	// Output:
	// locked: true owner host_id: 1
}

// store is a toy service that accepts a write only with a fencing token at
// least as large as every token it has seen.
type store struct {
	mu      sync.Mutex
	highest uint64
	data    string
}

func (st *store) Write(token uint64, data string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if token < st.highest {
		return fmt.Errorf("stale token %d < %d", token, st.highest)
	}
	st.highest, st.data = token, data
	return nil
}

// A fenced write: pass Token() with every write, and let the service
// refuse tokens older than the newest it has seen. A holder that was
// paused while its lease passed to another owner then cannot overwrite the
// newer owner's data.
func ExampleLease_Token() {
	ctx := context.Background()
	s, err := lease.NewSession(ctx, lease.Config{
		Lockspace: &lease.Lockspace{Name: "LS", HostID: 1, Path: leases, IOTimeout: 1},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	var st store

	l := s.Lease(lease.Resource{Name: "R3", Path: leases, Offset: 3 << 20})
	if err := l.Acquire(ctx); err != nil {
		log.Fatal(err)
	}
	old := l.Token()
	fmt.Println("first write:", st.Write(old, "a"))
	_ = l.Release(ctx)

	// The next holding (here the same process; normally another host)
	// gets a larger token.
	if err := l.Acquire(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("token grew:", l.Token() > old)
	fmt.Println("new write:", st.Write(l.Token(), "b"))
	fmt.Println("old holder's write refused:", st.Write(old, "stale") != nil)
	_ = l.Release(ctx)
	// Output:
	// first write: <nil>
	// token grew: true
	// new write: <nil>
	// old holder's write refused: true
}

// React to Lost(): stop the work the lease protects. Here a graceful
// request asks for the lease (as `sanlock client request -f 2` sends, on
// this host or another); a failing lockspace or a vanished daemon close
// Lost() the same way, each with its Reason.
func ExampleLease_Lost() {
	ctx := context.Background()
	s, err := lease.NewSession(ctx, lease.Config{
		Lockspace: &lease.Lockspace{Name: "LS", HostID: 1, Path: leases, IOTimeout: 1},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	l := s.Lease(lease.Resource{Name: "R1", Path: leases, Offset: 1 << 20})
	if err := l.Acquire(ctx); err != nil {
		log.Fatal(err)
	}

	// Somebody asks for R1 (here through the same daemon).
	requestLease(s, "R1", 1<<20)

	select {
	case <-l.Lost():
		var lost *lease.LostError
		errors.As(l.Err(), &lost)
		fmt.Println("lost:", errors.Is(l.Err(), lease.ErrLost), "reason:", lost.Reason)
	case <-time.After(30 * time.Second):
		fmt.Println("no notice")
	}
	// Output:
	// lost: true reason: requested (a graceful request asked for it)
}
