package manager

import (
	"context"
	"sync/atomic"
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

// versionDisk formats lockspace LS with delta version dv and resources
// R0..R2 with paxos version pv; edit then changes leaders before the
// manager starts (offset of the sector, the leader to rewrite).
func versionDisk(t *testing.T, dv, pv uint32, edits map[int64]func(*diskfmt.Leader)) *testdisk.Mem {
	t.Helper()
	ctx := context.Background()
	mem := testdisk.NewMem(8<<20, 512)
	require.NoError(t, diskfmt.WriteLockspace(ctx, mem, 0, 0, "LS", 1, dv))
	g, err := diskfmt.GeometryForWrite(0, 512)
	require.NoError(t, err)
	for i, name := range []string{"R0", "R1", "R2"} {
		require.NoError(t, diskfmt.WriteResource(ctx, []diskfmt.ResourceDisk{{Dev: mem, Offset: int64(i+1) << 20}}, 0,
			diskfmt.PaxosInit{Geometry: g, SpaceName: "LS", ResourceName: name, Version: pv}))
	}
	for off, edit := range edits {
		b := make([]byte, 512)
		require.NoError(t, mem.ReadAt(ctx, b, off))
		l, err := diskfmt.DecodeLeader(b)
		require.NoError(t, err)
		edit(&l)
		l.Seal(b)
		require.NoError(t, mem.WriteAt(ctx, b, off))
	}
	return mem
}

func startOn(t *testing.T, mem *testdisk.Mem, clients testClients) (*Manager, func()) {
	t.Helper()
	dead := &atomic.Bool{}
	open := func(string) (diskfmt.Device, error) { return testDisk{mem, dead}, nil }
	ctx, cancel := context.WithCancel(context.Background())
	m := New(Setup{Open: open, RunKillpath: func([]string) error { return nil },
		Context: ctx, HostName: "hostA", Settings: Settings{WatchdogFireTimeout: 60}})
	for _, c := range clients {
		m.Clients.Add(c.id, ClientStatus{Order: c.pid, Pid: c.pid, Registered: true, Name: "c"})
	}
	return m, func() { cancel(); m.Stop() }
}

func leaderAt(t *testing.T, mem *testdisk.Mem, off int64) diskfmt.Leader {
	t.Helper()
	b := make([]byte, 512)
	require.NoError(t, mem.ReadAt(context.Background(), b, off))
	l, err := diskfmt.DecodeLeader(b)
	require.NoError(t, err)
	return l
}

// TestNewerVersionsKept: a host joins a 5.0 lockspace and takes and gives
// back 7.0 resources; every record it rewrites keeps its version and the
// 5.x flag bits (NO_TIMEOUT, DEAD_EXT); a 7.0 resource and a host slot
// rewritten as 5.0 (5.1.1's init_host) inside a 3.4 lockspace work too.
func TestNewerVersionsKept(t *testing.T) {
	for _, tc := range []struct {
		name   string
		dv, pv uint32
		edits  map[int64]func(*diskfmt.Leader)
		own    uint32 // the version host 1's record must keep
	}{
		{name: "5.0 lockspace, 7.0 resources", dv: diskfmt.DeltaVersion50, pv: diskfmt.PaxosVersion70, own: diskfmt.DeltaVersion50},
		{name: "4.0 lockspace, 6.4 resources", dv: diskfmt.DeltaVersion40, pv: diskfmt.PaxosVersion, own: diskfmt.DeltaVersion40},
		{name: "3.4 lockspace, host slot 5.0, 7.0 resources", dv: diskfmt.DeltaVersion, pv: diskfmt.PaxosVersion70,
			edits: map[int64]func(*diskfmt.Leader){0: func(l *diskfmt.Leader) { l.Version = diskfmt.DeltaVersion50 }},
			own:   diskfmt.DeltaVersion50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				edits := map[int64]func(*diskfmt.Leader){
					1 << 20: func(l *diskfmt.Leader) { l.Flags |= diskfmt.LeaderNoTimeout | diskfmt.LeaderDeadExt },
				}
				for off, e := range tc.edits {
					edits[off] = e
				}
				mem := versionDisk(t, tc.dv, tc.pv, edits)
				a := &testClient{id: 1, pid: 100}
				m, stop := startOn(t, mem, testClients{100: a})
				defer stop()
				ctx := context.Background()
				require.NoError(t, m.Lockspaces.Add(ctx, AddRequest{Lockspace: testLS, IOTimeout: 1}))
				own := leaderAt(t, mem, 0)
				assert.Equal(t, tc.own, own.Version)
				assert.Equal(t, uint64(1), own.OwnerID)
				time.Sleep(5 * time.Second) // renewals
				renewed := leaderAt(t, mem, 0)
				assert.Greater(t, renewed.Timestamp, own.Timestamp)
				assert.Equal(t, tc.own, renewed.Version)

				for i := range 2 {
					off := int64(i+1) << 20
					before := leaderAt(t, mem, off)
					require.NoError(t, m.Resources.Acquire(ctx, a.id, AcquireRequest{Resources: []wire.Resource{testRes(i, 0)}}))
					held := leaderAt(t, mem, off)
					assert.Equal(t, before.Version, held.Version, "R%d held", i)
					assert.Equal(t, before.Flags, held.Flags, "R%d held", i)
					assert.Equal(t, uint64(1), held.OwnerID)
					assert.Equal(t, before.Lver+1, held.Lver)
					_, err := m.Resources.Release(ctx, a.id, ReleaseRequest{Resources: []wire.Resource{testRes(i, 0)}})
					require.NoError(t, err)
					rel := leaderAt(t, mem, off)
					assert.Equal(t, before.Version, rel.Version, "R%d released", i)
					assert.Equal(t, before.Flags, rel.Flags, "R%d released", i)
					assert.Zero(t, rel.Timestamp)
				}
				require.NoError(t, m.Lockspaces.Rem(ctx, RemRequest{Lockspace: testLS}))
				gone := leaderAt(t, mem, 0)
				assert.Zero(t, gone.Timestamp)
				assert.Equal(t, tc.own, gone.Version)
			})
		})
	}
}

// TestCAWRefused: a resource or our own host slot marked CAW (5.x's SCSI
// COMPARE AND WRITE, which we do not do) is refused with -283, as 5.1.1
// refuses it on a file, and nothing is written.
func TestCAWRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cawRes := func(l *diskfmt.Leader) { l.Flags |= diskfmt.LeaderCAW }
		mem := versionDisk(t, diskfmt.DeltaVersion50, diskfmt.PaxosVersion70, map[int64]func(*diskfmt.Leader){1 << 20: cawRes})
		a := &testClient{id: 1, pid: 100}
		m, stop := startOn(t, mem, testClients{100: a})
		defer stop()
		ctx := context.Background()
		require.NoError(t, m.Lockspaces.Add(ctx, AddRequest{Lockspace: testLS, IOTimeout: 1}))
		before := leaderAt(t, mem, 1<<20)
		err := m.Resources.Acquire(ctx, a.id, AcquireRequest{Resources: []wire.Resource{testRes(0, 0)}})
		assert.Equal(t, rescode.ErrCAWOpen, rescode.CodeOf(err))
		assert.Contains(t, plainCause(err), "marked for SCSI COMPARE AND WRITE")
		assert.Equal(t, before, leaderAt(t, mem, 1<<20))
		require.NoError(t, m.Resources.Acquire(ctx, a.id, AcquireRequest{Resources: []wire.Resource{testRes(1, 0)}}))
	})
	synctest.Test(t, func(t *testing.T) {
		mem := versionDisk(t, diskfmt.DeltaVersion50, diskfmt.PaxosVersion70, map[int64]func(*diskfmt.Leader){
			0: func(l *diskfmt.Leader) { l.Flags |= diskfmt.LeaderCAW },
		})
		m, stop := startOn(t, mem, nil)
		defer stop()
		before := leaderAt(t, mem, 0)
		err := m.Lockspaces.Add(context.Background(), AddRequest{Lockspace: testLS, IOTimeout: 1})
		assert.Equal(t, rescode.ErrCAWOpen, rescode.CodeOf(err))
		assert.Contains(t, Cause(err), "host_id 1 at "+testLS.Disk.Path+":0 is marked for SCSI COMPARE AND WRITE")
		assert.Equal(t, before, leaderAt(t, mem, 0))
	})
}

// TestInitVersionSettings: WRITE_LOCKSPACE and WRITE_RESOURCE write the
// versions of Settings (the daemon's create_*_disk_version keys), 3.4 and
// 6.4 when unset.
func TestInitVersionSettings(t *testing.T) {
	for _, st := range []Settings{{}, {DeltaVersion: diskfmt.DeltaVersion50, PaxosVersion: diskfmt.PaxosVersion70},
		{DeltaVersion: diskfmt.DeltaVersion40, PaxosVersion: diskfmt.PaxosVersion}} {
		mem := testdisk.NewMem(4<<20, 512)
		dead := &atomic.Bool{}
		open := func(string) (diskfmt.Device, error) { return testDisk{mem, dead}, nil }
		ctx, cancel := context.WithCancel(context.Background())
		st.WatchdogFireTimeout = 60
		m := New(Setup{Open: open, Context: ctx, HostName: "hostA", Settings: st})
		require.NoError(t, m.Lockspaces.WriteLockspace(ctx, testLS, 0))
		require.NoError(t, m.Disk.
			WriteResource(ctx, testRes(0, 0), 0, false))
		wantD, wantP := st.DeltaVersion, st.PaxosVersion
		if wantD == 0 {
			wantD, wantP = diskfmt.DeltaVersion, diskfmt.PaxosVersion
		}
		assert.Equal(t, wantD, leaderAt(t, mem, 0).Version)
		assert.Equal(t, wantD, leaderAt(t, mem, 512).Version)
		assert.Equal(t, wantP, leaderAt(t, mem, 1<<20).Version)
		cancel()
		m.Stop()
	}
}
