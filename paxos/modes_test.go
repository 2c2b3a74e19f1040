package paxos

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

var geometries = []struct {
	name string
	g    diskfmt.Geometry
}{{"512", geo512}, {"4K", geo4K}}

// TestShared: shared holders coexist, an exclusive acquire fails with
// -EAGAIN while one is alive (and uses up an lver, Q9), shared acquirers are
// refused while the lease is held exclusive.
func TestShared(t *testing.T) {
	for _, gc := range geometries {
		t.Run(gc.name, func(t *testing.T) {
			c := newCluster(t, gc.g, 1, 8)
			h1, h2, h3 := c.host(1, 1, nil), c.host(2, 5, nil), c.host(3, 1, nil)
			s1, err := h1.Acquire(bg, AcquireRequest{Shared: true})
			require.NoError(t, err)
			s2, err := h2.Acquire(bg, AcquireRequest{Shared: true})
			require.NoError(t, err)
			assert.True(t, s1.Shared())
			assert.Zero(t, s1.Lver())

			ld := c.leader(0)
			assert.Zero(t, ld.Timestamp, "SH-held lease has a free leader")
			assert.Equal(t, uint64(2), ld.Lver)
			assert.Zero(t, ld.Flags&diskfmt.LeaderShortHold)
			for id, gen := range map[uint64]uint64{1: 1, 2: 5} {
				d, mb := c.hostBlock(0, id)
				assert.Equal(t, diskfmt.ModeBlock{Flags: diskfmt.ModeShared, Generation: gen}, mb)
				assert.Equal(t, uint32(diskfmt.DblockReleased), d.Flags)
			}

			own, err := ReadResourceOwners(bg, c.mems[0], c.off, testSpace, testRes, 0)
			require.NoError(t, err)
			assert.True(t, own.Shared)
			assert.Equal(t, []Owner{{HostID: 1, Generation: 1}, {HostID: 2, Generation: 5}}, own.Owners)

			_, err = h3.Acquire(bg, AcquireRequest{})
			assert.Equal(t, rescode.ErrEAGAIN, code(err))
			assert.Equal(t, uint64(3), c.leader(0).Lver, "the failed EX acquire used up lver 3")
			assert.Zero(t, c.leader(0).Timestamp)

			require.NoError(t, s1.Release(bg, ReleaseOptions{}))
			_, mb := c.hostBlock(0, 1)
			assert.Zero(t, mb.Flags)
			require.NoError(t, s2.Release(bg, ReleaseOptions{}))

			x, err := h3.Acquire(bg, AcquireRequest{})
			require.NoError(t, err)
			before, _ := c.hostBlock(0, 1)
			_, err = h1.Acquire(bg, AcquireRequest{Shared: true})
			assert.Equal(t, rescode.ErrAcquireIDLive, code(err))
			// unlike sanlock (quirk Q2, a zero dblock), a failed SH acquire
			// that ran no ballot leaves our dblock as it was
			d, mb := c.hostBlock(0, 1)
			assert.Equal(t, before, d)
			assert.NotZero(t, d.Lver)
			assert.Zero(t, mb.Flags)

			own, err = ReadResourceOwners(bg, c.mems[0], c.off, testSpace, testRes, 0)
			require.NoError(t, err)
			assert.Equal(t, []Owner{{HostID: 3, Generation: 1, Timestamp: x.Leader.Timestamp}}, own.Owners)
			require.NoError(t, x.Release(bg, ReleaseOptions{}))
		})
	}
}

// TestSharedShortHoldRetry: a shared acquire that finds the leader briefly
// held by another shared acquirer (LFL_SHORT_HOLD) retries, and gives up
// with -246 after sh_retries.
func TestSharedShortHoldRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, geo512, 1, 8)
		var gate *gateDev
		h2 := c.host(2, 1, func(_ int, d diskfmt.Device) diskfmt.Device {
			gate = newGateDev(d, 7) // after the commit, before the combined write
			return gate
		})
		h1 := c.host(1, 1, nil)
		done := make(chan error)
		go func() {
			r, err := h2.Acquire(bg, AcquireRequest{Shared: true})
			if err == nil {
				err = r.Release(bg, ReleaseOptions{})
			}
			done <- err
		}()
		<-gate.reached
		ld := c.leader(0)
		assert.Equal(t, diskfmt.LeaderShortHold, ld.Flags&diskfmt.LeaderShortHold)

		start := time.Now()
		_, err := h1.Acquire(bg, AcquireRequest{Shared: true})
		assert.Equal(t, rescode.ErrAcquireShRetry, code(err))
		assert.Less(t, time.Since(start), 9*time.Second)
		assert.Greater(t, time.Since(start), time.Duration(0), "retries sleep")

		close(gate.release)
		require.NoError(t, <-done)
		r, err := h1.Acquire(bg, AcquireRequest{Shared: true})
		require.NoError(t, err)
		require.NoError(t, r.Release(bg, ReleaseOptions{}))
	})
}

// TestDeadSharedHolderCleared: an exclusive acquire zeroes the sector of a
// shared holder that is dead, and fails with -EAGAIN while it may be alive.
func TestDeadSharedHolderCleared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, geo512, 1, 8)
		h1, h2 := c.host(1, 1, nil), c.host(2, 1, nil)
		_, err := h2.Acquire(bg, AcquireRequest{Shared: true})
		require.NoError(t, err)
		c.world.kill(2)
		time.Sleep(10 * time.Second)
		_, err = h1.Acquire(bg, AcquireRequest{})
		require.Equal(t, rescode.ErrEAGAIN, code(err))

		time.Sleep(60 * time.Second) // now 70 s > 68 s since host 2 was last seen live
		r, err := h1.Acquire(bg, AcquireRequest{})
		require.NoError(t, err)
		sector := c.mems[0].Bytes()[c.off+hostOffset(2, 512):][:512]
		assert.Equal(t, make([]byte, 512), sector, "dead holder's sector zeroed")
		require.NoError(t, r.Release(bg, ReleaseOptions{}))
	})
}

// TestConvert: SH→EX fails with -EAGAIN while another host holds SH and
// keeps our shared hold; it succeeds once alone. EX→SH frees the leader.
func TestConvert(t *testing.T) {
	for _, gc := range geometries {
		t.Run(gc.name, func(t *testing.T) {
			c := newCluster(t, gc.g, 1, 8)
			h1, h2 := c.host(1, 1, nil), c.host(2, 1, nil)
			s1, err := h1.Acquire(bg, AcquireRequest{Shared: true})
			require.NoError(t, err)
			s2, err := h2.Acquire(bg, AcquireRequest{Shared: true})
			require.NoError(t, err)
			assert.Equal(t, ErrEALREADY, code(s1.Convert(bg, ConvertRequest{Shared: true})))

			assert.Equal(t, rescode.ErrEAGAIN, code(s1.Convert(bg, ConvertRequest{})))
			assert.True(t, s1.Shared())
			ld := c.leader(0)
			assert.Zero(t, ld.Timestamp, "leader freed again")
			assert.Equal(t, uint64(3), ld.Lver, "the failed convert used up lver 3")
			d, mb := c.hostBlock(0, 1)
			assert.Equal(t, diskfmt.ModeBlock{Flags: diskfmt.ModeShared, Generation: 1}, mb, "mode block kept")
			assert.Zero(t, d.Flags, "dblock not RELEASED (quirk Q8)")

			require.NoError(t, s2.Release(bg, ReleaseOptions{}))
			require.NoError(t, s1.Convert(bg, ConvertRequest{}))
			assert.False(t, s1.Shared())
			ld = c.leader(0)
			assert.Equal(t, uint64(1), ld.OwnerID)
			assert.NotZero(t, ld.Timestamp)
			assert.Equal(t, ld.Lver, s1.Lver())
			_, mb = c.hostBlock(0, 1)
			assert.Zero(t, mb.Flags)
			_, err = h2.Acquire(bg, AcquireRequest{Shared: true})
			assert.Equal(t, rescode.ErrAcquireIDLive, code(err))

			require.NoError(t, s1.Convert(bg, ConvertRequest{Shared: true}))
			assert.True(t, s1.Shared())
			assert.Zero(t, c.leader(0).Timestamp)
			_, mb = c.hostBlock(0, 1)
			assert.Equal(t, uint32(diskfmt.ModeShared), mb.Flags)
			s2, err = h2.Acquire(bg, AcquireRequest{Shared: true})
			require.NoError(t, err)
			require.NoError(t, s1.Release(bg, ReleaseOptions{}))
			require.NoError(t, s2.Release(bg, ReleaseOptions{}))
		})
	}
}

// TestReleaseRules: release codes -250 and -251, and rename.
func TestReleaseRules(t *testing.T) {
	c := newCluster(t, geo512, 1, 8)
	h1 := c.host(1, 1, nil)
	r1, err := h1.Acquire(bg, AcquireRequest{})
	require.NoError(t, err)
	require.NoError(t, r1.Release(bg, ReleaseOptions{}))
	assert.Equal(t, rescode.ErrReleaseOwner, code(r1.Release(bg, ReleaseOptions{})), "already free")

	r2, err := h1.Acquire(bg, AcquireRequest{})
	require.NoError(t, err)
	assert.Equal(t, rescode.ErrReleaseLver, code(r1.Release(bg, ReleaseOptions{})), "stale hold")
	require.NoError(t, r2.Release(bg, ReleaseOptions{Rename: "R2"}))
	ld := c.leader(0)
	assert.Equal(t, "R2", diskfmt.NameString(ld.ResourceName[:]))
	assert.Zero(t, ld.Timestamp)
	assert.Equal(t, uint64(1), ld.WriteID)
	assert.Equal(t, uint64(2), ld.Lver)
	assert.Equal(t, uint64(1), ld.OwnerID, "owner kept after release")

	// the renamed lease is no longer R1
	_, err = h1.Acquire(bg, AcquireRequest{})
	assert.Equal(t, rescode.ErrLeaderResource, code(err))
}

// TestAcquireLver: a required lver that differs fails with -240, even on a
// free lease.
func TestAcquireLver(t *testing.T) {
	c := newCluster(t, geo512, 1, 8)
	h1 := c.host(1, 1, nil)
	_, err := h1.Acquire(bg, AcquireRequest{Lver: 5})
	assert.Equal(t, rescode.ErrAcquireLver, code(err))
	r, err := h1.Acquire(bg, AcquireRequest{Lver: 0})
	require.NoError(t, err)
	require.NoError(t, r.Release(bg, ReleaseOptions{}))
	r, err = h1.Acquire(bg, AcquireRequest{Lver: 1, NumHosts: 6})
	require.NoError(t, err)
	assert.Equal(t, uint64(6), c.leader(0).NumHosts)
	require.NoError(t, r.Release(bg, ReleaseOptions{}))
	_, err = c.host(7, 1, nil).Acquire(bg, AcquireRequest{})
	assert.Equal(t, rescode.ErrLeaderNumHosts, code(err))
}

// TestLVB: the value set by an exclusive holder is written at release and
// read by the next acquire with LVB, at sector 2002 (also outside a 4K/1M
// area, quirk Q6). A shared release never writes it (Q5).
func TestLVB(t *testing.T) {
	for _, gc := range geometries {
		t.Run(gc.name, func(t *testing.T) {
			ss := gc.g.SectorSize
			c := newCluster(t, gc.g, 1, 8)
			h1, h2 := c.host(1, 1, nil), c.host(2, 1, nil)
			r, err := h1.Acquire(bg, AcquireRequest{LVB: true})
			require.NoError(t, err)
			v, err := r.LVB(0)
			require.NoError(t, err)
			assert.Equal(t, make([]byte, ss), v)
			assert.Equal(t, ErrE2BIG, code(r.SetLVB(make([]byte, ss+1))))
			require.NoError(t, r.SetLVB([]byte("hello-lvb")))
			lvbOff := c.off + int64(diskfmt.LVBSector*ss)
			assert.Equal(t, make([]byte, 9), c.mems[0].Bytes()[lvbOff:][:9], "no I/O before release")
			require.NoError(t, r.Release(bg, ReleaseOptions{}))
			assert.Equal(t, []byte("hello-lvb"), c.mems[0].Bytes()[lvbOff:][:9])

			r2, err := h2.Acquire(bg, AcquireRequest{LVB: true})
			require.NoError(t, err)
			v, err = r2.LVB(9)
			require.NoError(t, err)
			assert.Equal(t, []byte("hello-lvb"), v)
			v, err = r2.LVB(1 << 20)
			require.NoError(t, err)
			assert.Len(t, v, ss, "get_lvb is clamped to one sector")
			require.NoError(t, r2.Release(bg, ReleaseOptions{}))

			r3, err := h2.Acquire(bg, AcquireRequest{})
			require.NoError(t, err)
			assert.Equal(t, rescode.ErrEINVAL, code(r3.SetLVB([]byte("x"))))
			_, err = r3.LVB(0)
			assert.Equal(t, rescode.ErrEINVAL, code(err))
			require.NoError(t, r3.Release(bg, ReleaseOptions{}))

			s, err := h1.Acquire(bg, AcquireRequest{Shared: true, LVB: true})
			require.NoError(t, err)
			require.NoError(t, s.SetLVB([]byte("shared")))
			require.NoError(t, s.Release(bg, ReleaseOptions{}))
			assert.Equal(t, []byte("hello-lvb"), c.mems[0].Bytes()[lvbOff:][:9], "SH release does not write")
		})
	}
}

// TestRequest covers the requester's side and the owner's examine decision.
func TestRequest(t *testing.T) {
	c := newCluster(t, geo4K, 1, 8)
	h1, h2 := c.host(1, 1, nil), c.host(2, 1, nil)
	readRec := func() diskfmt.Request {
		rec, err := diskfmt.DecodeRequest(c.mems[0].Bytes()[c.off+4096:])
		require.NoError(t, err)
		return rec
	}

	res, err := h2.Request(bg, 0, diskfmt.ReqForce, true)
	require.NoError(t, err)
	assert.Equal(t, RequestResult{}, res, "free lease: nothing written (Q12)")

	r1, err := h1.Acquire(bg, AcquireRequest{})
	require.NoError(t, err)
	res, err = h2.Request(bg, 0, diskfmt.ReqForce, true)
	require.NoError(t, err)
	assert.Equal(t, RequestResult{Owner: 1, Lver: 2, Written: true}, res)
	assert.Equal(t, diskfmt.Request{Magic: diskfmt.RequestMagic, Version: diskfmt.RequestVersion, Lver: 2, ForceMode: 1}, readRec())

	rec, err := r1.ReadRequest(bg)
	require.NoError(t, err)
	assert.Equal(t, ExamineForce, DecideExamine(rec, nil, r1.Lver(), 1234))
	assert.Equal(t, ExamineIgnore, DecideExamine(rec, nil, r1.Lver(), 0), "never signal pid 0")

	_, err = h2.Request(bg, 1, diskfmt.ReqForce, false)
	assert.Equal(t, rescode.ErrRequestOld, code(err))
	_, err = h2.Request(bg, 2, diskfmt.ReqGraceful, false)
	require.NoError(t, err, "the same lver may be requested again")
	_, err = h2.Request(bg, 5, diskfmt.ReqForce, false)
	require.NoError(t, err)
	_, err = h2.Request(bg, 3, diskfmt.ReqForce, false)
	assert.Equal(t, rescode.ErrRequestLver, code(err))

	res, err = h2.Request(bg, 0, 0, false)
	require.NoError(t, err)
	assert.Equal(t, RequestResult{Written: true}, res, "clear request")
	assert.Equal(t, diskfmt.Request{Magic: diskfmt.RequestMagic, Version: diskfmt.RequestVersion}, readRec())
	rec, err = r1.ReadRequest(bg)
	assert.Equal(t, ExamineIgnore, DecideExamine(rec, err, r1.Lver(), 1234))

	c.mems[0].Load([]byte{1, 2, 3, 4}, c.off+4096)
	_, err = h2.Request(bg, 7, diskfmt.ReqForce, false)
	assert.Equal(t, rescode.ErrRequestMagic, code(err))
	_, err = r1.ReadRequest(bg)
	assert.Equal(t, rescode.ErrRequestMagic, code(err))
}

// TestCorruptDblock: one bad dblock checksum fails the acquire with -214.
func TestCorruptDblock(t *testing.T) {
	for _, gc := range geometries {
		t.Run(gc.name, func(t *testing.T) {
			c := newCluster(t, gc.g, 1, 8)
			c.mems[0].Load([]byte{9}, c.off+hostOffset(5, gc.g.SectorSize))
			_, err := c.host(1, 1, nil).Acquire(bg, AcquireRequest{})
			assert.Equal(t, rescode.ErrDblockChecksum, code(err))
		})
	}
}

// TestSizeHints: quirk Q3. A lease whose sector size differs from the
// lockspace's, or that is larger than the lockspace's area, fails with -214;
// a smaller 4K lease in an 8M lockspace is reread with its own sizes.
func TestSizeHints(t *testing.T) {
	geo4K8M := diskfmt.Geometry{SectorSize: 4096, AlignSize: diskfmt.Align8M, MaxHosts: 2000}
	cases := []struct {
		lease, space diskfmt.Geometry
		want         rescode.Code
	}{
		{geo4K, geo512, rescode.ErrDblockChecksum},
		{geo512, geo4K, rescode.ErrDblockChecksum},
		{geo4K8M, geo4K, rescode.ErrDblockChecksum},
		{geo4K, geo4K8M, 0},
	}
	for _, tc := range cases {
		t.Run(tc.lease.String()+"_in_"+tc.space.String(), func(t *testing.T) {
			// room for a hint that reads past the lease area
			c := newClusterSize(t, tc.lease, 1, 0, int64(tc.space.AlignSize))
			l := c.host(1, 1, nil)
			l.Host.Geometry = tc.space
			r, err := l.Acquire(bg, AcquireRequest{})
			assert.Equal(t, tc.want, code(err))
			if err == nil {
				assert.Equal(t, tc.lease, r.Geometry)
				require.NoError(t, r.Release(bg, ReleaseOptions{}))
			}
		})
	}
}

// staleTable is a Liveness whose host table entries come from a frozen
// snapshot (a table nobody processed for a while) while the delta leases
// are read fresh from the world.
type staleTable struct {
	*view
	frozen map[uint64]HostView
}

func (s staleTable) Host(id uint64) (HostView, bool) {
	if v, ok := s.frozen[id]; ok {
		return v, true
	}
	return s.view.Host(id)
}

// TestSharedHolderStaleTable: the simulator's seed 3 with a late main loop.
// Host 2 left the lockspace (our table still says: generation 1, timestamp
// 0), rejoined with generation 2 and holds the lease shared. An exclusive
// acquire of host 1 must not clear that live holder on the word of its
// stale table: it fails with -EAGAIN and host 2's mode block stays; the
// broken variant (BugStaleShared, in a build with the simbugs tag) clears
// it and gets the lease.
func TestSharedHolderStaleTable(t *testing.T) {
	bugs := []Bugs{0}
	if BugsCompiled {
		bugs = append(bugs, BugStaleShared)
	}
	for _, bug := range bugs {
		t.Run(bug.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCluster(t, geo512, 1, 8)
				h1, h2 := c.host(1, 1, nil), c.host(2, 2, nil)
				time.Sleep(5 * time.Second)
				v := h1.Host.Live.(*view)
				old := HostView{FirstCheck: v.first}
				now := clock.Monotime(v.clock)
				old.HostID, old.OwnerID, old.OwnerGeneration, old.IOTimeout = 2, 2, 1, testIO
				old.LastCheck, old.LastLive, old.Timestamp = now, now-3, 0
				h1.Host.Live = staleTable{view: v, frozen: map[uint64]HostView{2: old}}
				h1.Host.TestBugs = bug

				_, err := h2.Acquire(bg, AcquireRequest{Shared: true})
				require.NoError(t, err)
				r, err := h1.Acquire(bg, AcquireRequest{})
				_, mb := c.hostBlock(0, 2)
				if bug != 0 {
					require.NoError(t, err, "the broken variant clears the live holder")
					assert.Zero(t, mb.Flags)
					require.NoError(t, r.Release(bg, ReleaseOptions{}))
					return
				}
				require.Equal(t, rescode.ErrEAGAIN, code(err))
				assert.Equal(t, diskfmt.ModeBlock{Flags: diskfmt.ModeShared, Generation: 2}, mb, "live holder kept")
			})
		})
	}
}
