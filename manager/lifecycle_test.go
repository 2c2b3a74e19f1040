package manager

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/testdisk"
	"github.com/gosanlock/gosanlock/wire"
)

// spaceRecord returns the text of the LOCKSPACE record of LS, "" when
// there is none.
func spaceRecord(m *Manager) string {
	for _, r := range m.Lockspaces.StatusRecords() {
		if r.Name == "LS" {
			return r.Text
		}
	}
	return ""
}

// code is the wire result of err.
func code(err error) int { return int(rescode.CodeOf(err)) }

// TestNewSetup: New resolves one Setup for both sides (zero values are
// the production choices), uses the registry and usage it is given, and
// wires lockspaces, resources and disk commands to each other.
func TestNewSetup(t *testing.T) {
	m := New(Setup{})
	cfg := m.Lockspaces.cfg
	assert.Same(t, cfg, m.Resources.cfg, "one setup for both sides")
	assert.NotNil(t, cfg.Clock)
	assert.NotNil(t, cfg.Open)
	assert.NotNil(t, cfg.Kill)
	assert.NotNil(t, cfg.RunKillpath)
	assert.NotNil(t, cfg.Log)
	assert.NotNil(t, cfg.Context)
	assert.Equal(t, time.Second, cfg.CheckInterval)
	assert.Equal(t, time.Second, cfg.PollInterval)
	assert.Same(t, cfg.Clients, m.Clients)
	assert.Same(t, m.Clients, m.Lockspaces.clients)
	assert.Same(t, m.Clients, m.Resources.clients)
	assert.Equal(t, LockspaceUsage(m.Resources), m.Lockspaces.usage)
	assert.Equal(t, spaceView(m.Lockspaces), m.Resources.spaces)
	assert.Same(t, m.Lockspaces, m.Disk.ls)
	assert.Equal(t, DefaultIOTimeout, m.Lockspaces.defaultIOTimeout())

	reg := NewClientRegistry()
	u := &countUsage{}
	m = New(Setup{Clients: reg, Usage: u, CheckInterval: 3 * time.Second, Settings: Settings{IOTimeout: 4}})
	assert.Same(t, reg, m.Clients)
	assert.Same(t, reg, m.Lockspaces.clients)
	assert.Equal(t, LockspaceUsage(u), m.Lockspaces.usage, "Usage replaces the resource side")
	assert.Equal(t, 3*time.Second, m.Lockspaces.cfg.CheckInterval)
	assert.Equal(t, 4, m.Lockspaces.defaultIOTimeout())
}

// countUsage is a LockspaceUsage that counts SpaceDead and SpaceGone.
type countUsage struct {
	mu         sync.Mutex
	dead, gone int
}

func (*countUsage) SpaceResources(string) (int, int) { return 0, 0 }
func (*countUsage) SpaceHolders(string) []int        { return nil }
func (*countUsage) Examine(string)                   {}
func (u *countUsage) SpaceDead(string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.dead++
}
func (u *countUsage) SpaceGone(string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.gone++
}

func (u *countUsage) counts() (dead, gone int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.dead, u.gone
}

func TestEnding(t *testing.T) {
	for _, tc := range []struct {
		e       ending
		dead    bool
		killing int
	}{{endLiving, false, 0}, {endKilling, true, 1}, {endStuck, true, 2}} {
		assert.Equal(t, tc.dead, tc.e.dead(), "%d", tc.e)
		assert.Equal(t, tc.killing, tc.e.killingPids(), "%d", tc.e)
	}
}

// TestSpaceRemoval: rem_lockspace of a joined lockspace starts its end
// (space_dead=1 killing_pids=1, the resource side told once), SET_CONFIG
// USED holds it on the spaces list, still joined, and refuses a new USED
// once it is dead; UNUSED lets it go. Simulated time.
func TestSpaceRemoval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := &countUsage{}
		m, _, stop := newUsageManager(t, u)
		defer stop()
		ctx := context.Background()
		ls := m.Lockspaces
		rec := spaceRecord(m)
		assert.True(t, strings.HasPrefix(rec, "list=spaces "), rec)
		assert.Contains(t, rec, " space_dead=0 killing_pids=0 ")
		host, err := ls.PaxosHost("LS")
		require.NoError(t, err)
		require.NotNil(t, host)

		require.NoError(t, ls.SetConfig("LS", wire.ConfigUsed))
		require.NoError(t, ls.Rem(ctx, RemRequest{Lockspace: testLS, Async: true}))
		time.Sleep(3 * time.Second)
		synctest.Wait()
		rec = spaceRecord(m)
		assert.True(t, strings.HasPrefix(rec, "list=spaces "), rec)
		assert.Contains(t, rec, " space_dead=1 killing_pids=1 ")
		assert.Contains(t, rec, " external_used=1 ")
		assert.NotContains(t, rec, " used_retries=0 ", "USED blocks the removal")
		assert.Equal(t, rescode.RvENOSPC, code(ls.SetConfig("LS", wire.ConfigUsed)), "no new USED once dead")
		assert.NoError(t, ls.Inq(ctx, InqRequest{Lockspace: testLS}), "still joined while dying")
		_, err = ls.PaxosHost("LS")
		assert.Equal(t, rescode.RvENOSPC, code(err), "no new leases in a dead lockspace")
		dead, gone := u.counts()
		assert.Equal(t, 1, dead)
		assert.Zero(t, gone)

		require.NoError(t, ls.SetConfig("LS", wire.ConfigUnused))
		time.Sleep(3 * time.Second)
		synctest.Wait()
		assert.Equal(t, rescode.RvENOENT, code(ls.Inq(ctx, InqRequest{Lockspace: testLS})))
		assert.Zero(t, ls.Count())
		assert.Empty(t, spaceRecord(m))
		dead, gone = u.counts()
		assert.Equal(t, 1, dead)
		assert.Equal(t, 1, gone)
	})
}

// TestSpaceAddCancelled: a rem_lockspace during the add makes the add
// fail and frees the entry; while adding, inq answers -EINPROGRESS and
// STATUS shows the add list. Simulated time.
func TestSpaceAddCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := &countUsage{}
		m, _, stop := newUsageManager(t, u)
		defer stop()
		ctx := context.Background()
		ls := m.Lockspaces
		require.NoError(t, ls.Rem(ctx, RemRequest{Lockspace: testLS}))
		require.Zero(t, ls.Count())

		added := make(chan error, 1)
		go func() { added <- ls.Add(ctx, AddRequest{Lockspace: testLS, IOTimeout: 1}) }()
		time.Sleep(time.Second) // inside the acquire's waits
		synctest.Wait()
		assert.Equal(t, rescode.RvEINPROGRESS, code(ls.Inq(ctx, InqRequest{Lockspace: testLS})))
		assert.True(t, strings.HasPrefix(spaceRecord(m), "list=add "), spaceRecord(m))
		assert.Equal(t, rescode.RvEINPROGRESS, code(ls.Add(ctx, AddRequest{Lockspace: testLS, IOTimeout: 1})),
			"a second add while adding")
		require.NoError(t, ls.Rem(ctx, RemRequest{Lockspace: testLS}))
		err := <-added
		assert.Error(t, err, "the add was cancelled")
		assert.Zero(t, ls.Count())
		assert.Equal(t, rescode.RvENOENT, code(ls.Inq(ctx, InqRequest{Lockspace: testLS})))
	})
}

// TestSpaceStuck: when the lease fails and the only holder ignores every
// signal, the end stops at killing_pids=2 after killCountMax kills and no
// more are sent; once the holder dies the lockspace leaves. Simulated
// time.
func TestSpaceStuck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		kills := 0
		kill := func(int, syscall.Signal) error {
			mu.Lock()
			defer mu.Unlock()
			kills++
			return nil // the holder ignores it
		}
		a := &testClient{id: 1, pid: 100}
		m, dead, stop := newTestManager(t, kill, testClients{100: a}, Settings{KillGraceSeconds: 1})
		defer stop()
		ctx := context.Background()
		require.NoError(t, m.Resources.Acquire(ctx, a.id, AcquireRequest{Resources: []wire.Resource{testRes(0, 0)}}))
		dead.Store(true)
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		rec := spaceRecord(m)
		assert.Contains(t, rec, " space_dead=1 killing_pids=2 ")
		mu.Lock()
		n := kills
		mu.Unlock()
		assert.Equal(t, killCountMax, n)
		time.Sleep(time.Minute)
		synctest.Wait()
		mu.Lock()
		assert.Equal(t, n, kills, "no kill once stuck")
		mu.Unlock()

		m.Resources.ClientDead(a.id)
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		assert.Zero(t, m.Lockspaces.Count(), "the lockspace left once its holder was gone")
	})
}

// TestLockspaceRegistry: what add refuses while a lockspace of the same
// name or disk exists, GET_LOCKSPACES's order and flags (joined, then
// being added, newest first on each list), and that nothing is added once
// the manager stopped. Simulated time.
func TestLockspaceRegistry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, mem, stop := newUsageManager(t, &countUsage{})
		defer stop()
		ctx := context.Background()
		ls := m.Lockspaces
		require.NoError(t, diskfmt.WriteLockspace(ctx, mem, 1<<20, 0, "LS2", 1, 0))
		ls2 := wire.Lockspace{Name: "LS2", HostID: 1, Disk: wire.Disk{Path: "/", Offset: 1 << 20}}

		add := func(l wire.Lockspace) int {
			return code(ls.Add(ctx, AddRequest{Lockspace: l, IOTimeout: 1, Async: true}))
		}
		assert.Equal(t, rescode.RvEEXIST, add(testLS))
		assert.Equal(t, rescode.RvEINVAL, add(wire.Lockspace{Name: "LX", HostID: 1, Disk: testLS.Disk}), "same disk, other name")
		assert.Equal(t, rescode.RvEINVAL, add(wire.Lockspace{HostID: 1, Disk: testLS.Disk}), "no name")
		assert.Equal(t, rescode.RvEINVAL, add(wire.Lockspace{Name: "LS3", Disk: testLS.Disk}), "host_id 0")

		require.Zero(t, add(ls2))
		assert.Equal(t, rescode.RvEINPROGRESS, add(ls2))
		names := func() []string {
			var out []string
			for _, l := range ls.List() {
				out = append(out, fmt.Sprintf("%s:%d", l.Name, l.Flags))
			}
			return out
		}
		assert.Equal(t, []string{"LS:0", fmt.Sprintf("LS2:%d", wire.LSFAdd)}, names())
		assert.Equal(t, 2, ls.Count())

		time.Sleep(30 * time.Second) // past the acquire's waits
		synctest.Wait()
		require.NoError(t, ls.Inq(ctx, InqRequest{Lockspace: ls2}))
		assert.Equal(t, []string{"LS2:0", "LS:0"}, names(), "newest first")

		stop()
		assert.Equal(t, rescode.RvEPERM, add(wire.Lockspace{Name: "LS3", HostID: 1, Disk: wire.Disk{Path: "/", Offset: 2 << 20}}))
	})
}

// newUsageManager formats LS on an in-memory disk and joins it as host 1
// with u as the resource side.
func newUsageManager(t *testing.T, u LockspaceUsage) (*Manager, *testdisk.Mem, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	mem := testdisk.NewMem(2<<20, 512)
	require.NoError(t, diskfmt.WriteLockspace(ctx, mem, 0, 0, "LS", 1, 0))
	open := func(string) (diskfmt.Device, error) { return nopCloseMem{mem}, nil }
	m := New(Setup{Open: open, Usage: u, RunKillpath: func([]string) error { return nil },
		Kill: func(int, syscall.Signal) error { return nil }, Context: ctx, HostName: "hostA",
		Settings: Settings{WatchdogFireTimeout: 60}})
	require.NoError(t, m.Lockspaces.Add(ctx, AddRequest{Lockspace: testLS, IOTimeout: 1}))
	return m, mem, func() { cancel(); m.Stop() }
}

type nopCloseMem struct{ *testdisk.Mem }

func (nopCloseMem) Close() error { return nil }

// TestDiskOps: the disk commands through Setup.Open: write a resource
// lease, read it back and list its owners (none); the paxos version
// written follows Settings; an rindex operation needs a joined lockspace
// (-ENOENT) and a failed open is its -errno.
func TestDiskOps(t *testing.T) {
	ctx := context.Background()
	mem := testdisk.NewMem(4<<20, 512)
	m := New(Setup{Open: func(p string) (diskfmt.Device, error) {
		if p != "/mem" {
			return nil, syscall.ENOENT
		}
		return nopCloseMem{mem}, nil
	}})
	d := m.Disk
	res := wire.Resource{LockspaceName: "LS", Name: "R1", Disks: []wire.Disk{{Path: "/mem", Offset: 1 << 20}}}
	require.NoError(t, d.WriteResource(ctx, res, 0, false))

	got := wire.Resource{Disks: res.Disks}
	require.NoError(t, d.ReadResource(ctx, &got))
	assert.Equal(t, "LS", got.LockspaceName)
	assert.Equal(t, "R1", got.Name)
	assert.Zero(t, got.LVer)

	owners, err := d.ReadResourceOwners(ctx, &res)
	require.NoError(t, err)
	assert.Empty(t, owners)

	missing := wire.Resource{LockspaceName: "LS", Name: "R2", Disks: []wire.Disk{{Path: "/none"}}}
	assert.Equal(t, rescode.RvENOENT, code(d.WriteResource(ctx, missing, 0, false)), "the open's -errno")

	_, err = d.paxosHost("LS")
	assert.Equal(t, rescode.RvENOENT, code(err), "an rindex lease needs a joined lockspace")

	m.Lockspaces.cfg.Settings.PaxosVersion = diskfmt.PaxosVersion70
	assert.Equal(t, diskfmt.PaxosVersion70, d.paxosVersion())
}
