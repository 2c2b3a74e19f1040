package manager

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

func initRecord(gen uint64, name string, ts uint64) []byte {
	b := make([]byte, wire.DeltaLeaderSize)
	binary.LittleEndian.PutUint64(b[40:], gen)
	copy(b[104:], name)
	binary.LittleEndian.PutUint64(b[152:], ts)
	return b
}

// READ_LOCKSPACE_HOST, INIT_LOCKSPACE_HOST and LS_FLAGS on the test disk,
// the lockspace LS joined as host 1.
func TestLockspaceHostCommands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _, stop := newTestManager(t, nil, testClients{}, Settings{})
		defer stop()
		ctx := context.Background()
		ls := m.Lockspaces
		disk := wire.Disk{Path: "/"}

		// Host 1: ours, joined.
		out, h, io, err := ls.ReadLockspaceHost(ctx, wire.Lockspace{Disk: disk})
		require.NoError(t, err)
		assert.Equal(t, "LS", out.Name)
		assert.Equal(t, uint64(1), out.HostID)
		assert.Equal(t, uint32(0x110), out.Flags)
		assert.Equal(t, uint64(1), h.HostID)
		assert.Equal(t, uint64(1), h.Generation)
		assert.NotZero(t, h.Timestamp)
		assert.Equal(t, uint32(1), io)

		_, _, _, err = ls.ReadLockspaceHost(ctx, wire.Lockspace{Name: "other", HostID: 1, Disk: disk})
		assert.Equal(t, rescode.ErrLeaderLockspace, rescode.CodeOf(err))
		_, _, _, err = ls.ReadLockspaceHost(ctx, wire.Lockspace{HostID: 3000, Disk: disk})
		assert.Equal(t, rescode.Code(-90), rescode.CodeOf(err))

		// init_host of host 5; of our own host 1: refused; host_id 0, no name: -22.
		req := InitLockspaceHostRequest{Lockspace: wire.Lockspace{Name: "LS", HostID: 5, Disk: disk},
			Flags: wire.InitHostUseCAW, Record: initRecord(3, "hostfive", 1234)}
		require.NoError(t, ls.InitLockspaceHost(ctx, req))
		out, h, io, err = ls.ReadLockspaceHost(ctx, wire.Lockspace{Name: "LS", HostID: 5, Disk: disk})
		require.NoError(t, err)
		assert.Equal(t, wire.Host{HostID: 5, Generation: 3, Timestamp: 1234, IOTimeout: 10}, h)
		assert.Equal(t, uint32(0x110), out.Flags, "no CAW mark")
		assert.Equal(t, uint32(10), io)
		own := req
		own.Lockspace.HostID = 1
		assert.Equal(t, rescode.ErrEBUSY, rescode.CodeOf(ls.InitLockspaceHost(ctx, own)))
		// Host 2 renews in LS (its lease changes at each of our renewals
		// after we saw it): we see it alive, init_host of it is refused.
		two := req
		two.Lockspace.HostID = 2
		two.Record = initRecord(1, "hostB", 500)
		require.NoError(t, ls.InitLockspaceHost(ctx, two), "host 2 not seen yet")
		for i := uint64(1); i <= 6; i++ {
			dev, err := ls.Open("/")
			require.NoError(t, err)
			sec, err := diskfmt.DeltaHostSector(diskfmt.DeltaHost{Geometry: diskfmt.Geometry{SectorSize: 512, AlignSize: 1 << 20, MaxHosts: 2000},
				Space: "LS", HostID: 2, Generation: 1, HostName: "hostB", Timestamp: 500 + i, IOTimeout: 1})
			require.NoError(t, err)
			require.NoError(t, dev.WriteAt(ctx, sec, 512))
			time.Sleep(time.Second)
		}
		assert.Equal(t, rescode.ErrEBUSY, rescode.CodeOf(ls.InitLockspaceHost(ctx, two)), "host 2 is alive")
		zero := req
		zero.Lockspace.HostID = 0
		assert.Equal(t, rescode.ErrEINVAL, rescode.CodeOf(ls.InitLockspaceHost(ctx, zero)))
		noName := req
		noName.Lockspace.Name = ""
		assert.Equal(t, rescode.ErrEINVAL, rescode.CodeOf(ls.InitLockspaceHost(ctx, noName)))
		noTmo := req
		noTmo.Lockspace.HostID = 9
		noTmo.Lockspace.Flags = lsfNoTimeout
		assert.Equal(t, rescode.ErrEINVAL, rescode.CodeOf(ls.InitLockspaceHost(ctx, noTmo)), "NO_TIMEOUT in a 3.4 lease")

		// LS_FLAGS: size checks, then refused on our joined lockspace.
		lsf := func(flags uint32) error {
			return ls.WriteLockspaceFlags(ctx, wire.Lockspace{Name: "LS", Flags: flags, Disk: disk})
		}
		assert.Equal(t, rescode.ErrEINVAL, rescode.CodeOf(lsf(0)))
		assert.Equal(t, rescode.ErrEPERM, rescode.CodeOf(lsf(0x10)))
		assert.Equal(t, rescode.ErrEPERM, rescode.CodeOf(lsf(0x100)))
		assert.Equal(t, rescode.ErrEBUSY, rescode.CodeOf(lsf(0x114)))

		// GET_HOSTS LOCAL: our own record.
		hs, err := ls.LocalHost("LS")
		require.NoError(t, err)
		require.Len(t, hs, 1)
		assert.Equal(t, uint64(1), hs[0].HostID)
		_, err = ls.LocalHost("nope")
		assert.Equal(t, rescode.ErrENOENT, rescode.CodeOf(err))

		// After leaving, LS_FLAGS rewrites NO_TIMEOUT into every lease and
		// keeps the rest of each.
		require.NoError(t, ls.Rem(ctx, RemRequest{Lockspace: testLS}))
		require.NoError(t, lsf(0x114))
		out, h, _, err = ls.ReadLockspaceHost(ctx, wire.Lockspace{Name: "LS", HostID: 5, Disk: disk})
		require.NoError(t, err)
		assert.Equal(t, uint32(0x114), out.Flags)
		assert.Equal(t, wire.Host{HostID: 5, Generation: 3, Timestamp: 1234, IOTimeout: 10}, h)
		rl, _, err := ls.ReadLockspace(ctx, wire.Lockspace{Disk: disk})
		require.NoError(t, err)
		assert.Equal(t, uint32(0x114), rl.Flags)
		require.NoError(t, lsf(0x110))
		out, _, _, err = ls.ReadLockspaceHost(ctx, wire.Lockspace{HostID: 1, Disk: disk})
		require.NoError(t, err)
		assert.Equal(t, uint32(0x110), out.Flags)
	})
}

// RELEASE NO_DISK leaves the leader owned; ACQUIRE2 of a lease our host
// holds for another local client is -17 (no owner record), and of one
// held by another host -243 with the owner.
func TestReleaseNoDiskAndAcquire2(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := &testClient{id: 1, pid: 100}, &testClient{id: 2, pid: 200}
		m, _, stop := newTestManager(t, nil, testClients{100: a, 200: b}, Settings{})
		defer stop()
		ctx := context.Background()
		r := m.Resources
		res := []wire.Resource{testRes(0, 0)}
		require.NoError(t, r.Acquire(ctx, a.id, AcquireRequest{Resources: res}))
		err := r.Acquire2(ctx, b.id, AcquireRequest{Resources: res})
		var he *HeldError
		assert.False(t, errors.As(err, &he), "held on this host: %v", err)
		assert.Equal(t, rescode.ErrEEXIST, rescode.CodeOf(err))

		_, err = r.Release(ctx, a.id, ReleaseRequest{Resources: res, Flags: wire.RelNoDisk})
		require.NoError(t, err)
		held, err := r.Inquire(a.id)
		require.NoError(t, err)
		assert.Empty(t, held)
		dev, err := m.Lockspaces.Open("/")
		require.NoError(t, err)
		raw, err := diskfmt.ReadSector(ctx, dev, 1<<20, 512)
		require.NoError(t, err)
		l, _ := diskfmt.DecodeLeader(raw)
		assert.Equal(t, uint64(1), l.OwnerID, "the leader stays ours on disk")
		assert.NotZero(t, l.Timestamp)
		lver := l.Lver

		// Taken again by this host: lver + 1.
		require.NoError(t, r.Acquire2(ctx, b.id, AcquireRequest{Resources: res}))
		raw, err = diskfmt.ReadSector(ctx, dev, 1<<20, 512)
		require.NoError(t, err)
		l, _ = diskfmt.DecodeLeader(raw)
		assert.Equal(t, lver+1, l.Lver)
		_, err = r.Release(ctx, b.id, ReleaseRequest{Resources: res})
		require.NoError(t, err)

		// Another host (host 2, alive) owns R1: its leader says so and its
		// delta lease renews; acquire2 answers -243 with the owner.
		write2 := func(ts uint64) {
			sec, err := diskfmt.DeltaHostSector(diskfmt.DeltaHost{Geometry: diskfmt.Geometry{SectorSize: 512, AlignSize: 1 << 20, MaxHosts: 2000},
				Space: "LS", HostID: 2, Generation: 4, HostName: "hostB", Timestamp: ts, IOTimeout: 1})
			require.NoError(t, err)
			require.NoError(t, dev.WriteAt(ctx, sec, 512))
		}
		raw, err = diskfmt.ReadSector(ctx, dev, 2<<20, 512)
		require.NoError(t, err)
		l, _ = diskfmt.DecodeLeader(raw)
		l.OwnerID, l.OwnerGeneration, l.Timestamp, l.Lver = 2, 4, 77, 1
		l.Seal(raw)
		require.NoError(t, dev.WriteAt(ctx, raw, 2<<20))
		for i := uint64(1); i <= 8; i++ {
			write2(1000 + i)
			time.Sleep(time.Second)
		}
		done := make(chan error)
		go func() { done <- r.Acquire2(ctx, a.id, AcquireRequest{Resources: []wire.Resource{testRes(1, 0)}}) }()
		var got error
		for i := uint64(9); got == nil; i++ {
			select {
			case got = <-done:
			default:
				write2(1000 + i)
				time.Sleep(time.Second)
			}
		}
		require.True(t, errors.As(got, &he), "%v", got)
		assert.Equal(t, rescode.ErrAcquireIDLive, he.Code)
		assert.Equal(t, wire.Host{HostID: 2, Generation: 4, Timestamp: 77, Flags: wire.HostLive}, he.Owner)
		assert.Equal(t, "hostB", he.OwnerName)
	})
}
