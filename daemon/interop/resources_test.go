package interop

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/daemon"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/internal/testutil"
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// resCluster is two in-process daemons (host_ids 1 and 2) joined to one
// io_timeout 1 lockspace "LS" at offset 0 of a lease file, with resources
// R0..R(n-1) at 1 MiB, 2 MiB, ...
type resCluster struct {
	path string
	tds  []*testDaemon
	ls   []*wire.Lockspace
}

func newResCluster(t *testing.T, hosts, nres int, mcfg manager.Setup, mods ...func(*daemon.Config)) *resCluster {
	t.Helper()
	path := testutil.ResourceFile(t, nres)
	rc := &resCluster{path: path}
	joins := testutil.NewJoins(t, path)
	for i := 0; i < hosts; i++ {
		td := startDaemon(t, func(c *daemon.Config, d *daemon.Deps) {
			c.OurHostName = fmt.Sprintf("host%d", i+1)
			d.Manager = mcfg
			for _, f := range mods {
				f(c)
			}
		})
		td.cl.Timeout = 30 * time.Second
		rc.tds = append(rc.tds, td)
		joins.Add(td.cl)
	}
	rc.ls = joins.Wait()
	return rc
}

func (rc *resCluster) res(i int, flags uint32) wire.Resource {
	return testutil.Resource(rc.path, i, flags)
}

func TestResourceAcquireRelease(t *testing.T) {
	t.Parallel()
	rc := newResCluster(t, 2, 2, manager.Setup{})
	a, b := rc.tds[0].cl, rc.tds[1].cl

	ra, err := a.Register(context.Background())
	require.NoError(t, err)
	defer ra.Close()
	rb, err := b.Register(context.Background())
	require.NoError(t, err)
	defer rb.Close()

	r0 := rc.res(0, 0)
	require.NoError(t, ra.Acquire(context.Background(), []wire.Resource{r0}, 0, nil))
	inq, err := ra.Inquire(context.Background())
	state, n := inq.State, inq.Count
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, fmt.Sprintf("LS:R0:%s:1048576:1", rc.path), state)

	// Held on this host: -EEXIST; on the other host: -243 (owner alive).
	assert.Equal(t, rescode.RvEEXIST, testutil.Code(ra.Acquire(context.Background(), []wire.Resource{r0}, 0, nil)))
	assert.Equal(t, int(rescode.ErrAcquireIDLive), testutil.Code(rb.Acquire(context.Background(), []wire.Resource{r0}, 0, nil)))

	recs, err := a.Status(context.Background(), wire.StateResource)
	require.NoError(t, err)
	var rlines []string
	for _, r := range recs {
		if r.Type == wire.StateResource {
			rlines = append(rlines, r.Name+" "+r.Text)
		}
	}
	require.Len(t, rlines, 1)
	assert.Contains(t, rlines[0], "R0 list=held flags=0 sector_size=512 align_size=1048576 lver=1")

	_, err = ra.Release(context.Background(), []wire.Resource{r0}, 0)
	require.NoError(t, err)
	inq, ierr := ra.Inquire(context.Background())
	n, err = inq.Count, ierr
	require.NoError(t, err)
	assert.Equal(t, 0, n)
	_, err = ra.Release(context.Background(), []wire.Resource{r0}, 0)
	assert.Equal(t, rescode.RvEPERM, testutil.Code(err))

	// Now host 2 gets it, with the next lver.
	require.NoError(t, rb.Acquire(context.Background(), []wire.Resource{r0}, 0, nil))
	inq, err = rb.Inquire(context.Background())
	state = inq.State
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(state, ":2"), state)

	// Shared: both hosts hold R1 SH; EX is refused while they do.
	r1sh := rc.res(1, wire.ResShared)
	require.NoError(t, ra.Acquire(context.Background(), []wire.Resource{r1sh}, 0, nil))
	require.NoError(t, rb.Acquire(context.Background(), []wire.Resource{r1sh}, 0, nil))
	_, owners, err := a.ReadResourceOwners(context.Background(), &wire.Resource{LockspaceName: "LS", Name: "R1",
		Disks: []wire.Disk{{Path: rc.path, Offset: 2 << 20}}})
	if testutil.Code(err) != -38 { // READ_RESOURCE_OWNERS may not be wired yet
		require.NoError(t, err)
		assert.Len(t, owners, 2)
	}
	n2, err := rb.Release(context.Background(), nil, wire.RelAll)
	require.NoError(t, err)
	assert.Equal(t, 0, n2)
	inq, err = rb.Inquire(context.Background())
	n = inq.Count
	require.NoError(t, err)
	assert.Equal(t, 0, n)
}

// TestResourceClientDeath: a holder process that exits loses its lease and
// the other host can take it at once; a persistent lease becomes an orphan.
func TestResourceClientDeath(t *testing.T) {
	t.Parallel()
	rc := newResCluster(t, 2, 2, manager.Setup{})
	a, b := rc.tds[0].cl, rc.tds[1].cl

	ra, err := a.Register(context.Background())
	require.NoError(t, err)
	require.NoError(t, ra.Acquire(context.Background(), []wire.Resource{rc.res(0, 0), rc.res(1, wire.ResPersistent)}, 0, nil))
	require.NoError(t, ra.Close()) // the "process" goes away

	rb, err := b.Register(context.Background())
	require.NoError(t, err)
	defer rb.Close()
	require.Eventually(t, func() bool {
		return rb.Acquire(context.Background(), []wire.Resource{rc.res(0, 0)}, 0, nil) == nil
	}, 10*time.Second, 50*time.Millisecond)

	// R1 is an orphan on host 1: still owned on disk, EUCLEAN locally.
	assert.Equal(t, int(rescode.ErrAcquireIDLive), testutil.Code(rb.Acquire(context.Background(), []wire.Resource{rc.res(1, 0)}, 0, nil)))
	ra2, err := a.Register(context.Background())
	require.NoError(t, err)
	defer ra2.Close()
	assert.Equal(t, rescode.RvEUCLEAN, testutil.Code(ra2.Acquire(context.Background(), []wire.Resource{rc.res(1, 0)}, 0, nil)))
	recs, err := a.Status(context.Background(), wire.StateResource)
	require.NoError(t, err)
	found := false
	for _, r := range recs {
		if r.Type == wire.StateResource && strings.Contains(r.Text, "list=orphan") {
			found = true
		}
	}
	assert.True(t, found, "orphan shown in status")
	// Adopt it, then release it; host 2 can then take it.
	require.NoError(t, ra2.Acquire(context.Background(), []wire.Resource{rc.res(1, 0)}, wire.AcquireOrphan, nil))
	inq, err := ra2.Inquire(context.Background())
	state := inq.State
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(state, ":1"), "lver kept: %s", state)
	_, err = ra2.Release(context.Background(), []wire.Resource{rc.res(1, 0)}, 0)
	require.NoError(t, err)
	require.NoError(t, rb.Acquire(context.Background(), []wire.Resource{rc.res(1, 0)}, 0, nil))
}

// TestResourceParallelAcquires: acquires of different resources by
// different clients proceed together, and every one succeeds.
func TestResourceParallelAcquires(t *testing.T) {
	t.Parallel()
	const n = 8
	rc := newResCluster(t, 1, n, manager.Setup{})
	a := rc.tds[0].cl
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reg, err := a.Register(context.Background())
			if !assert.NoError(t, err) {
				return
			}
			defer reg.Close()
			for j := 0; j < 5; j++ {
				if !assert.NoError(t, reg.Acquire(context.Background(), []wire.Resource{rc.res(i, 0)}, 0, nil)) {
					return
				}
				_, err := reg.Release(context.Background(), []wire.Resource{rc.res(i, 0)}, 0)
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
}

// TestResourceRequestExamine: a FORCE request from host 2 makes host 1
// kill the holder once it sees the request bit.
func TestResourceRequestExamine(t *testing.T) {
	t.Parallel()
	killed := make(chan int, 4)
	var once sync.Once
	rc := newResCluster(t, 2, 1, manager.Setup{Kill: func(pid int, sig syscall.Signal) error {
		if sig == syscall.SIGKILL {
			once.Do(func() { killed <- pid })
		}
		return nil
	}})
	a, b := rc.tds[0].cl, rc.tds[1].cl
	ra, err := a.Register(context.Background())
	require.NoError(t, err)
	defer ra.Close()
	require.NoError(t, ra.Acquire(context.Background(), []wire.Resource{rc.res(0, 0)}, 0, nil))

	r := rc.res(0, 0)
	require.NoError(t, b.Request(context.Background(), &r, wire.RequestNextLVer, wire.ReqForce))
	select {
	case pid := <-killed:
		assert.Equal(t, os.Getpid(), pid)
	case <-time.After(20 * time.Second):
		t.Fatal("holder not killed after a FORCE request")
	}
}

// TestRevocationNotice: a Go client that watches for revocations hears of
// a GRACEFUL request from another host and of the loss of its lockspace's
// storage through the kill program, before SIGKILL.
func TestRevocationNotice(t *testing.T) {
	open, dead := crashable()
	var mu sync.Mutex
	var sigs []syscall.Signal
	lcfg := manager.Setup{Open: open, Kill: func(pid int, sig syscall.Signal) error {
		mu.Lock()
		defer mu.Unlock()
		if pid == os.Getpid() {
			sigs = append(sigs, sig)
		}
		return nil
	}}
	rc := newResCluster(t, 2, 1, lcfg, func(c *daemon.Config) { c.KillGraceSeconds = 3 })
	a, b := rc.tds[0].cl, rc.tds[1].cl
	reg, err := a.Register(context.Background())
	require.NoError(t, err)
	defer reg.Close()
	notices, stop, err := reg.WatchRevocations(context.Background()) // before acquiring: see its doc
	require.NoError(t, err)
	defer stop()
	require.NoError(t, reg.Acquire(context.Background(), []wire.Resource{rc.res(0, 0)}, 0, nil))

	r := rc.res(0, 0)
	require.NoError(t, b.Request(context.Background(), &r, wire.RequestNextLVer, wire.ReqGraceful))
	select {
	case n := <-notices:
		assert.Equal(t, syscall.SIGUSR1, n.Signal)
	case <-time.After(20 * time.Second):
		t.Fatal("no notice for a GRACEFUL request")
	}

	start := time.Now()
	dead.Store(true) // host 1 loses its storage
	select {
	case n := <-notices:
		assert.Equal(t, syscall.SIGUSR1, n.Signal)
		t.Logf("storage lost: notice after %v", time.Since(start).Round(time.Millisecond))
	case <-time.After(30 * time.Second):
		t.Fatal("no notice after the storage was lost")
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(sigs, syscall.SIGKILL)
	}, 30*time.Second, 100*time.Millisecond, "SIGKILL after the grace period")
	t.Logf("storage lost: SIGKILL after %v", time.Since(start).Round(time.Millisecond))
	mu.Lock()
	assert.NotContains(t, sigs, syscall.SIGTERM, "the kill program replaces SIGTERM")
	mu.Unlock()
}

// fakeWatchdog records a lockspace's watchdog calls.
type fakeWatchdog struct {
	mu     sync.Mutex
	calls  []string
	expire uint64
}

func (w *fakeWatchdog) add(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, s)
}
func (w *fakeWatchdog) Activate(l, e uint64) error {
	w.mu.Lock()
	w.expire = e
	w.mu.Unlock()
	w.add(fmt.Sprintf("activate +%d", e-l))
	return nil
}
func (w *fakeWatchdog) Renewed(ts, e uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.expire = e
	if n := len(w.calls); n == 0 || w.calls[n-1] != fmt.Sprintf("renewed +%d", e-ts) {
		w.calls = append(w.calls, fmt.Sprintf("renewed +%d", e-ts))
	}
	return nil
}
func (w *fakeWatchdog) Deactivate() error { w.add("deactivate"); return nil }
func (w *fakeWatchdog) Close() error      { w.add("close"); return nil }
func (w *fakeWatchdog) Handover() (*os.File, string, bool, error) {
	return nil, "", false, errors.New("a fake watchdog cannot be handed over")
}
func (w *fakeWatchdog) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.calls)
}

// TestWatchdogLifecycle: with the watchdog on, a lockspace activates its
// expiry (L + 8*io) after the join, moves it at every renewal and removes
// it when the lockspace is left; when storage is lost, it is removed only
// once every holder has exited, and never while one remains.
func TestWatchdogLifecycle(t *testing.T) {
	t.Parallel()
	for _, obey := range []bool{true, false} {
		t.Run(fmt.Sprintf("holder_exits=%v", obey), func(t *testing.T) {
			t.Parallel()
			open, dead := crashable()
			wd := &fakeWatchdog{}
			var reg *client.Reg
			var regMu sync.Mutex
			lcfg := manager.Setup{
				Open:         open,
				OpenWatchdog: func(string, uint64) (manager.WatchdogSession, error) { return wd, nil },
				Kill: func(pid int, sig syscall.Signal) error {
					regMu.Lock()
					defer regMu.Unlock()
					if obey && reg != nil {
						_ = reg.Close() // the holder exits on its first signal
						reg = nil
					}
					return nil
				},
			}
			rc := newResCluster(t, 1, 1, lcfg, func(c *daemon.Config) { c.UseWatchdog = true; c.KillGraceSeconds = 2 })
			a := rc.tds[0].cl
			r, err := a.Register(context.Background())
			require.NoError(t, err)
			regMu.Lock()
			reg = r
			regMu.Unlock()
			require.NoError(t, r.Acquire(context.Background(), []wire.Resource{rc.res(0, 0)}, 0, nil))
			require.Eventually(t, func() bool { return len(wd.list()) >= 2 }, 10*time.Second, 50*time.Millisecond)
			assert.Equal(t, []string{"activate +8", "renewed +8"}, wd.list()[:2])

			dead.Store(true)
			if obey {
				require.Eventually(t, func() bool { return slices.Contains(wd.list(), "deactivate") }, 30*time.Second,
					100*time.Millisecond, "expiry removed once the holder exited: %v", wd.list())
				return
			}
			// The holder ignores every signal: the expiry stays, so the
			// watchdog resets the host.
			time.Sleep(14 * time.Second)
			assert.NotContains(t, wd.list(), "deactivate")
			regMu.Lock()
			_ = reg.Close()
			regMu.Unlock()
		})
	}
}

// TestRestrictSigkill: rem_lockspace kills holders with SIGKILL, except a
// client that restricted SIGKILL, which gets SIGTERM (docs/delta.md "Signalling holders").
func TestRestrictSigkill(t *testing.T) {
	t.Parallel()
	sigs := make(chan syscall.Signal, 8)
	lcfg := manager.Setup{Kill: func(pid int, sig syscall.Signal) error {
		select {
		case sigs <- sig:
		default:
		}
		return nil
	}}
	rc := newResCluster(t, 1, 1, lcfg)
	a := rc.tds[0].cl
	reg, err := a.Register(context.Background())
	require.NoError(t, err)
	require.NoError(t, reg.Restrict(context.Background(), wire.RestrictSigkill))
	require.NoError(t, reg.Acquire(context.Background(), []wire.Resource{rc.res(0, 0)}, 0, nil))
	require.NoError(t, a.RemLockspace(context.Background(), rc.ls[0], wire.RemAsync))
	select {
	case s := <-sigs:
		assert.Equal(t, syscall.SIGTERM, s)
	case <-time.After(10 * time.Second):
		t.Fatal("holder not signalled")
	}
	require.NoError(t, reg.Close())
	require.Eventually(t, func() bool {
		return testutil.Code(a.InqLockspace(context.Background(), rc.ls[0], 0)) == rescode.RvENOENT
	},
		10*time.Second, 50*time.Millisecond, "lockspace gone once the holder exited")
}
