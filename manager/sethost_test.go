package manager

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
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

// startHostOn starts a manager for host name on mem whose disk can be cut
// (dead: every I/O fails) and whose kills are only counted.
func startHostOn(t *testing.T, mem *testdisk.Mem, name string, clients testClients) (*Manager, *atomic.Bool, func()) {
	t.Helper()
	dead := &atomic.Bool{}
	kill := func(int, syscall.Signal) error { return nil }
	open := func(string) (diskfmt.Device, error) { return testDisk{mem, dead}, nil }
	ctx, cancel := context.WithCancel(context.Background())
	m := New(Setup{Open: open, Kill: kill, RunKillpath: func([]string) error { return nil },
		Context: ctx, HostName: name, Settings: Settings{WatchdogFireTimeout: 60}})
	for _, c := range clients {
		m.Clients.Add(c.id, ClientStatus{Order: c.pid, Pid: c.pid, Registered: true, Name: "c"})
	}
	return m, dead, func() { cancel(); m.Stop() }
}

// TestNoTimeoutDeadExt: two hosts of a NO_TIMEOUT lockspace (their slots
// carry the 5.x flag). Host 2 holds R0 and stops renewing (its disk is
// cut). Host 1 sees it FAIL, never DEAD, and cannot take R0 by time
// (-249 after host_dead_seconds, still -249 much later); set_host
// DEAD_EXT with a wrong generation is refused (-280) and changes nothing;
// with host 2's generation it marks the lease, host 2 shows DEAD with the
// DEAD_EXT host flag, and host 1 acquires R0 at once.
func TestNoTimeoutDeadExt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nt := func(l *diskfmt.Leader) { l.Flags |= diskfmt.LeaderNoTimeout }
		mem := versionDisk(t, diskfmt.DeltaVersion50, diskfmt.PaxosVersion70, map[int64]func(*diskfmt.Leader){0: nt, 512: nt})
		a, b := &testClient{id: 1, pid: 100}, &testClient{id: 2, pid: 200}
		m1, _, stop1 := startHostOn(t, mem, "host1", testClients{100: a})
		defer stop1()
		m2, dead2, stop2 := startHostOn(t, mem, "host2", testClients{200: b})
		defer stop2()
		ctx := context.Background()
		ls2 := testLS
		ls2.HostID = 2
		require.NoError(t, m1.Lockspaces.Add(ctx, AddRequest{Lockspace: testLS, IOTimeout: 1}))
		require.NoError(t, m2.Lockspaces.Add(ctx, AddRequest{Lockspace: ls2, IOTimeout: 1}))
		spaces := m1.Lockspaces.List()
		require.Len(t, spaces, 1)
		assert.Equal(t, uint32(wire.LSFNoTimeout), spaces[0].Flags&wire.LSFNoTimeout, "get_lockspaces flags")

		require.NoError(t, m2.Resources.Acquire(ctx, b.id, AcquireRequest{Resources: []wire.Resource{testRes(0, 0)}}))
		gen2 := leaderAt(t, mem, 512).OwnerGeneration
		time.Sleep(5 * time.Second)
		err := m1.Resources.Acquire(ctx, a.id, AcquireRequest{Resources: []wire.Resource{testRes(0, 0)}})
		assert.Equal(t, rescode.ErrAcquireIDLive, rescode.CodeOf(err), "a live owner: -243")
		dead2.Store(true) // host 2 stops renewing; its lease stays on disk
		cut := time.Now()
		time.Sleep(10 * time.Second)
		err = m1.Resources.Acquire(ctx, a.id, AcquireRequest{Resources: []wire.Resource{testRes(0, 0)}})
		assert.Equal(t, rescode.ErrAcquireOwnedNoTimeout, rescode.CodeOf(err))
		assert.GreaterOrEqual(t, time.Since(cut), 68*time.Second, "-249 comes after host_dead_seconds")
		time.Sleep(10 * time.Minute)
		hosts, err := m1.Lockspaces.GetHosts("LS", 2)
		require.NoError(t, err)
		assert.Equal(t, uint32(wire.HostFail), hosts[0].Flags, "a silent NO_TIMEOUT host stays FAIL")
		err = m1.Resources.Acquire(ctx, a.id, AcquireRequest{Resources: []wire.Resource{testRes(0, 0)}})
		assert.Equal(t, rescode.ErrAcquireOwnedNoTimeout, rescode.CodeOf(err), "never by time")
		assert.Equal(t, uint64(2), leaderAt(t, mem, 1<<20).OwnerID)

		// set_host: the answers 5.1.1 gives for bad requests, then ours
		// for a wrong generation.
		h2 := wire.Host{HostID: 2, Generation: gen2 + 1}
		assert.Equal(t, rescode.ErrENOENT, rescode.CodeOf(m1.Lockspaces.SetHost(ctx, wire.Lockspace{Name: "other", HostID: 1}, 1, h2)))
		assert.Equal(t, rescode.ErrEINVAL, rescode.CodeOf(m1.Lockspaces.SetHost(ctx, wire.Lockspace{Name: "LS"}, 1, h2)))
		assert.Equal(t, rescode.ErrEINVAL, rescode.CodeOf(m1.Lockspaces.SetHost(ctx, wire.Lockspace{Name: "LS", HostID: 3}, 1, h2)))
		assert.Equal(t, rescode.ErrEINVAL, rescode.CodeOf(m1.Lockspaces.SetHost(ctx, testLS, 2, h2)))
		assert.Equal(t, rescode.ErrEINVAL, rescode.CodeOf(m1.Lockspaces.SetHost(ctx, testLS, 1, wire.Host{})))
		assert.Equal(t, rescode.ErrWrongGeneration, rescode.CodeOf(m1.Lockspaces.SetHost(ctx, testLS, 1, h2)))
		unmarked := leaderAt(t, mem, 512)
		assert.False(t, unmarked.DeadExt())

		h2.Generation = gen2
		require.NoError(t, m1.Lockspaces.SetHost(ctx, testLS, 1, h2))
		marked := leaderAt(t, mem, 512)
		assert.True(t, marked.DeadExt())
		assert.Equal(t, diskfmt.DeadExtMark, marked.Unused1)
		time.Sleep(3 * time.Second) // a renewal read sees the mark
		hosts, err = m1.Lockspaces.GetHosts("LS", 2)
		require.NoError(t, err)
		assert.Equal(t, uint32(0x15), hosts[0].Flags, "DEAD with the DEAD_EXT host flag, as 5.1.1")
		recs, err := m1.Lockspaces.HostStatus("LS")
		require.NoError(t, err)
		require.Len(t, recs, 2)
		assert.Contains(t, recs[1].Text, "no_timeout=1 dead_ext=1 found_dead_ext_gen=0 wrote_dead_ext_gen=1 host_flags=0x15 host_state=DEAD")

		start := time.Now()
		require.NoError(t, m1.Resources.Acquire(ctx, a.id, AcquireRequest{Resources: []wire.Resource{testRes(0, 0)}}))
		assert.Less(t, time.Since(start), 5*time.Second, "taken at once after DEAD_EXT")
		assert.Equal(t, uint64(1), leaderAt(t, mem, 1<<20).OwnerID)
	})
}

// TestGenerationFile: with Settings.GenerationDir, each join saves the
// generation it took as text in delta_lease_LS_1 (5.1.1's name); a saved
// value that does not precede the new generation is only logged.
func TestGenerationFile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		m, _, stop := newTestManager(t, nil, nil, Settings{GenerationDir: dir})
		defer stop()
		ctx := context.Background()
		path := filepath.Join(dir, "delta_lease_LS_1")
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, "1\n", string(b))
		require.NoError(t, m.Lockspaces.Rem(ctx, RemRequest{Lockspace: testLS}))
		require.NoError(t, os.WriteFile(path, []byte("7\n"), 0o644))
		require.NoError(t, m.Lockspaces.Add(ctx, AddRequest{Lockspace: testLS, IOTimeout: 1}))
		b, err = os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, "2\n", string(b), "a mismatch changes nothing")
	})
}
