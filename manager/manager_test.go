package manager

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/testdisk"
	"github.com/gosanlock/gosanlock/wire"
)

// testClient is a registered client: newTestManager enters it in the
// manager's client registry as the daemon enters a connection.
type testClient struct {
	id  ClientID
	pid int
}

type testClients map[int]*testClient

// status returns c's state in m's client registry.
func (c *testClient) status(m *Manager) ClientStatus {
	st, _ := m.Clients.Status(c.id)
	return st
}

// testDisk is an in-memory lease disk that can be made to fail every I/O
// (lost storage) and stays open when the manager closes it.
type testDisk struct {
	*testdisk.Mem
	dead *atomic.Bool
}

func (d testDisk) ReadAt(ctx context.Context, p []byte, off int64) error {
	if d.dead.Load() {
		return syscall.EIO
	}
	return d.Mem.ReadAt(ctx, p, off)
}

func (d testDisk) WriteAt(ctx context.Context, p []byte, off int64) error {
	if d.dead.Load() {
		return syscall.EIO
	}
	return d.Mem.WriteAt(ctx, p, off)
}

func (testDisk) Close() error { return nil }

// newTestManager formats a lockspace LS (io_timeout 1) and resources R0..R2
// on one in-memory disk and starts a manager on it, joined to LS as host 1.
func newTestManager(t *testing.T, kill func(pid int, sig syscall.Signal) error, clients testClients, st Settings) (*Manager, *atomic.Bool, context.CancelFunc) {
	t.Helper()
	return newTestManagerClock(t, nil, kill, clients, st)
}

// newTestManagerClock is newTestManager with the lockspaces' clock clk
// (nil: the system clock).
func newTestManagerClock(t *testing.T, clk clock.Clock, kill func(pid int, sig syscall.Signal) error, clients testClients, st Settings) (*Manager, *atomic.Bool, context.CancelFunc) {
	t.Helper()
	ctx := context.Background()
	mem := testdisk.NewMem(8<<20, 512)
	require.NoError(t, diskfmt.WriteLockspace(ctx, mem, 0, 0, "LS", 1, 0))
	g, err := diskfmt.GeometryForWrite(0, 512)
	require.NoError(t, err)
	for i, name := range []string{"R0", "R1", "R2"} {
		require.NoError(t, diskfmt.WriteResource(ctx, []diskfmt.ResourceDisk{{Dev: mem, Offset: int64(i+1) << 20}}, 0,
			diskfmt.PaxosInit{Geometry: g, SpaceName: "LS", ResourceName: name}))
	}
	dead := &atomic.Bool{}
	open := func(string) (diskfmt.Device, error) { return testDisk{mem, dead}, nil }
	mctx, cancel := context.WithCancel(ctx)
	st.WatchdogFireTimeout = 60 // the daemon's default
	m := New(Setup{Open: open, Kill: kill, Clock: clk, RunKillpath: func([]string) error { return nil },
		Context: mctx, HostName: "hostA", Settings: st})
	for _, c := range clients {
		m.Clients.Add(c.id, ClientStatus{Order: c.pid, Pid: c.pid, Registered: true, Name: strconv.Itoa(c.pid)})
	}
	require.NoError(t, m.Lockspaces.Add(ctx, AddRequest{Lockspace: testLS, IOTimeout: 1}))
	return m, dead, func() { cancel(); m.Stop() }
}

// testLS is the lockspace of newTestManager. The disk path must exist (a
// release checks it): any directory does.
var testLS = wire.Lockspace{Name: "LS", HostID: 1, Disk: wire.Disk{Path: "/"}}

func testRes(i int, flags uint32) wire.Resource {
	return wire.Resource{LockspaceName: "LS", Name: []string{"R0", "R1", "R2"}[i], Flags: flags,
		Disks: []wire.Disk{{Path: "/", Offset: uint64(i+1) << 20}}}
}

// lists returns the list= of every RESOURCE record.
func lists(m *Manager) []string {
	var out []string
	for _, r := range m.Resources.StatusRecords() {
		var l string
		for _, f := range []string{"held", "add", "rem", "orphan"} {
			if len(r.Text) > 5+len(f) && r.Text[:5+len(f)] == "list="+f {
				l = f
			}
		}
		out = append(out, r.Resource.Name+":"+l)
	}
	return out
}

// TestManagerLeases: acquire, inquire, release and client death with
// persistent leases (orphans), in simulated time without a daemon.
func TestManagerLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := &testClient{id: 1, pid: 100}, &testClient{id: 2, pid: 200}
		m, _, stop := newTestManager(t, nil, testClients{100: a, 200: b}, Settings{})
		defer stop()
		ctx := context.Background()
		r := m.Resources

		require.NoError(t, r.Acquire(ctx, a.id, AcquireRequest{Resources: []wire.Resource{testRes(0, 0)}, OwnerName: "vm1"}))
		assert.Equal(t, "vm1", a.status(m).Name)
		err := r.Acquire(ctx, b.id, AcquireRequest{Resources: []wire.Resource{testRes(0, 0)}})
		assert.Error(t, err, "a second exclusive holder on the same host")
		held, err := r.Inquire(a.id)
		require.NoError(t, err)
		require.Len(t, held, 1)
		assert.Equal(t, "R0", held[0].Name)
		assert.Equal(t, []int{100}, r.SpaceHolders("LS"))

		// Shared by both clients, then released by one.
		sh := testRes(1, wire.ResShared)
		require.NoError(t, r.Acquire(ctx, a.id, AcquireRequest{Resources: []wire.Resource{sh}}))
		require.NoError(t, r.Acquire(ctx, b.id, AcquireRequest{Resources: []wire.Resource{sh}}))
		n, err := r.Release(ctx, b.id, ReleaseRequest{Resources: []wire.Resource{sh}})
		require.NoError(t, err)
		assert.Zero(t, n)
		_, err = r.Release(ctx, b.id, ReleaseRequest{Resources: []wire.Resource{sh}})
		assert.Equal(t, rescode.Code(rescode.RvEPERM), rescode.CodeOf(err), "not held by b any more")

		// A persistent lease becomes an orphan when its client dies; the
		// others are released in the background.
		require.NoError(t, r.Acquire(ctx, a.id, AcquireRequest{Resources: []wire.Resource{testRes(2, wire.ResPersistent)}}))
		r.ClientDead(a.id)
		synctest.Wait()
		assert.Equal(t, []string{"R2:orphan"}, lists(m))
		all, orphans := r.SpaceResources("LS")
		assert.Equal(t, 1, all)
		assert.Equal(t, 1, orphans)
		_, err = r.Inquire(b.id)
		require.NoError(t, err)
		// The orphan is adopted by an ORPHAN acquire, then released.
		require.NoError(t, r.Acquire(ctx, b.id, AcquireRequest{Resources: []wire.Resource{testRes(2, wire.ResPersistent)},
			Flags: wire.AcquireOrphan}))
		assert.Equal(t, []string{"R2:held"}, lists(m))
		_, err = r.Release(ctx, b.id, ReleaseRequest{Flags: wire.RelAll})
		require.NoError(t, err)
		assert.Empty(t, lists(m))

		require.NoError(t, m.Lockspaces.Rem(ctx, RemRequest{Lockspace: testLS}))
		assert.Zero(t, m.Lockspaces.Count())
	})
}

// TestManagerEscalation: when the lockspace storage is lost, the holder
// gets SIGTERM from the renewal failure deadline on and SIGKILL once the
// grace period ends; once it is gone the lockspace leaves. Simulated time:
// the 8 s, the grace and the late-release wait pass instantly.
func TestManagerEscalation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		type sent struct {
			at  time.Duration
			sig syscall.Signal
		}
		var sigs []sent
		var m *Manager
		start := time.Now()
		a := &testClient{id: 1, pid: 100}
		kill := func(pid int, sig syscall.Signal) error {
			mu.Lock()
			defer mu.Unlock()
			sigs = append(sigs, sent{time.Since(start).Round(time.Second), sig})
			if sig == syscall.SIGKILL {
				go m.Resources.ClientDead(a.id) // the holder dies
			}
			return nil
		}
		m, dead, stop := newTestManager(t, kill, testClients{100: a}, Settings{KillGraceSeconds: 3})
		defer stop()
		ctx := context.Background()
		require.NoError(t, m.Resources.Acquire(ctx, a.id, AcquireRequest{Resources: []wire.Resource{testRes(0, 0)}}))
		start = time.Now()
		dead.Store(true)
		require.NoError(t, m.Lockspaces.Inq(ctx, InqRequest{Lockspace: testLS}))
		time.Sleep(2 * time.Minute) // past the late-release deadline (host_dead_seconds - 2 io_timeout)
		synctest.Wait()

		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, sigs)
		last := sigs[len(sigs)-1]
		assert.Equal(t, syscall.SIGKILL, last.sig)
		for _, s := range sigs[:len(sigs)-1] {
			assert.Equal(t, syscall.SIGTERM, s.sig)
		}
		assert.Less(t, sigs[0].at, last.at, "SIGTERM first, SIGKILL after the grace period")
		assert.Equal(t, len(sigs), a.status(m).KillCount)
		assert.Zero(t, m.Lockspaces.Count(), "the lockspace left once its holder was gone")
		assert.Empty(t, lists(m))
	})
}

// waitClock records when each Clock.Wait (the main loop's idle wait) ends
// and whether a wake-up ended it.
type waitClock struct {
	*clock.System
	mu    sync.Mutex
	waits []waitEnd
}

type waitEnd struct {
	at    time.Duration
	woken bool
}

func (c *waitClock) Wait(ctx context.Context, d time.Duration, wake <-chan struct{}) (bool, error) {
	woken, err := c.System.Wait(ctx, d, wake)
	c.mu.Lock()
	c.waits = append(c.waits, waitEnd{c.Now(), woken})
	c.mu.Unlock()
	return woken, err
}

func (c *waitClock) take() []waitEnd {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.waits
	c.waits = nil
	return w
}

// TestIdleMonitorWakes: an idle lockspace's main loop (space.monitor) does
// not pass every second: each renewal wakes it and nothing else does in
// between; with the renewals stopped it wakes by itself exactly at the
// second the own-lease check first warns (L + id_renewal_warn_seconds);
// rem_lockspace wakes it at once. Simulated time.
func TestIdleMonitorWakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := &waitClock{System: clock.NewAt(100*time.Second + 300*time.Millisecond)}
		m, _, stop := newTestManagerClock(t, clk, nil, testClients{}, Settings{})
		defer stop()
		ctx := context.Background()
		run, ok := m.Lockspaces.Joined("LS")
		require.True(t, ok)

		time.Sleep(time.Second)
		synctest.Wait()
		clk.take()
		reads := run.Status().Reads
		time.Sleep(30 * time.Second) // renewals every 2-3 s (io_timeout 1)
		synctest.Wait()
		renewals := run.Status().Reads - reads
		require.GreaterOrEqual(t, renewals, uint64(10))
		waits := clk.take()
		for _, w := range waits {
			assert.True(t, w.woken, "an idle pass at %v without a renewal", w.at)
		}
		assert.InDelta(t, float64(renewals), float64(len(waits)), 1, "one pass per renewal: %v", waits)

		// No more renewals (as when wdmd is lost): the next wake-up is the
		// warning pass.
		run.Halt()
		time.Sleep(3 * time.Second)
		synctest.Wait()
		last := run.Status().RenewalLastSuccess
		clk.take()
		time.Sleep(time.Duration(last+6)*time.Second - clk.Now() + 100*time.Millisecond)
		synctest.Wait()
		waits = clk.take()
		require.Len(t, waits, 1, "%v", waits)
		assert.False(t, waits[0].woken)
		assert.Equal(t, time.Duration(last+6)*time.Second, waits[0].at, "the pass that warns, at L+6N")
		assert.Equal(t, uint64(last), run.Status().RenewalLastSuccess)

		// rem_lockspace does not wait for a pass. (Passes now come every
		// second, warning: start over with an idle lockspace.)
		require.NoError(t, m.Lockspaces.Rem(ctx, RemRequest{Lockspace: testLS}))
		require.NoError(t, m.Lockspaces.Add(ctx, AddRequest{Lockspace: testLS, IOTimeout: 1}))
		time.Sleep(10 * time.Second)
		synctest.Wait()
		clk.take()
		start := time.Now()
		require.NoError(t, m.Lockspaces.Rem(ctx, RemRequest{Lockspace: testLS}))
		assert.Less(t, time.Since(start), 100*time.Millisecond, "rem_lockspace waited for a pass")
		assert.Zero(t, m.Lockspaces.Count())
		waits = clk.take()
		require.NotEmpty(t, waits)
		assert.True(t, waits[0].woken, "rem_lockspace woke the idle main loop")
	})
}
