package delta_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

var ioTimeouts = []int{1, 10}

// Acquire of a free lease: one read, write, 2N wait, read back; docs/delta.md
// "Acquiring a host_id".
func TestAcquireFree(t *testing.T) {
	for _, io := range ioTimeouts {
		t.Run(fmt.Sprint("io", io), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newLockspaceDisk(t, geo512, io)
				dev := newFaultDev(m)
				clk := clock.NewAt(500 * time.Second)
				l := delta.Lease{Dev: dev, Geometry: geo512, Space: space, HostID: 3,
					Timing: delta.NewTiming(io, 0), Clock: clk}
				start := clk.Now()
				acq, err := l.Acquire(t.Context(), "hostA")
				require.NoError(t, err)
				assert.Equal(t, seconds(2*io), clk.Now()-start)
				assert.Equal(t, uint64(500), acq.LastSuccess)
				assert.Equal(t, int64(2), dev.reads.Load())
				assert.Equal(t, int64(1), dev.writes.Load())

				rec, sec := leaseOnDisk(t, m, geo512, 3)
				assert.Equal(t, acq.Leader, rec)
				assert.Equal(t, uint64(3), rec.OwnerID)
				assert.Equal(t, uint64(1), rec.OwnerGeneration)
				assert.Equal(t, uint64(500), rec.Timestamp)
				assert.Equal(t, uint16(io), rec.IOTimeout)
				assert.Equal(t, "hostA", diskfmt.NameString(rec.ResourceName[:]))
				assert.Empty(t, diskfmt.BitmapHosts(sec, 2000))

				// Release frees it and keeps the rest.
				require.NoError(t, l.Release(t.Context(), acq.Leader))
				rel, _ := leaseOnDisk(t, m, geo512, 3)
				assert.Zero(t, rel.Timestamp)
				assert.Equal(t, uint64(1), rel.OwnerGeneration)
				assert.Equal(t, "hostA", diskfmt.NameString(rel.ResourceName[:]))

				// Reacquire by another host: free, so no long wait; generation 2.
				l2 := l
				l2.Clock = clock.NewAt(9000 * time.Second)
				acq2, err := l2.Acquire(t.Context(), "hostB")
				require.NoError(t, err)
				assert.Equal(t, uint64(2), acq2.Leader.OwnerGeneration)
			})
		})
	}
}

// The delays follow the lease's io_timeout, not ours; docs/timing.md "Mixed io_timeouts".
func TestAcquireMixedIOTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newLockspaceDisk(t, geo512, 10)
		clk := clock.NewAt(500 * time.Second)
		l := delta.Lease{Dev: m, Geometry: geo512, Space: space, HostID: 1,
			Timing: delta.NewTiming(1, 0), Clock: clk}
		acq, err := l.Acquire(t.Context(), "hostA")
		require.NoError(t, err)
		assert.Equal(t, 520*time.Second, clk.Now())
		assert.Equal(t, uint16(1), acq.Leader.IOTimeout)
		require.NoError(t, l.Release(t.Context(), acq.Leader))

		// Lease now says 1; an acquirer with own 10 waits 2.
		l.Timing = delta.NewTiming(10, 0)
		start := clk.Now()
		_, err = l.Acquire(t.Context(), "hostB")
		require.NoError(t, err)
		assert.Equal(t, 2*time.Second, clk.Now()-start)
	})
}

// See docs/delta.md "Completing the add": with lease io 10 and own io 1 the acquire timestamp is 20
// s old at join; the first renewal must happen before the lockspace counts as
// joined, so the own-lease check never sees the stale gap.
func TestJoinRenewsFirstWhenDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		m := newLockspaceDisk(t, geo512, 10)
		h := startHost(t, ctx, m, hostOpts{hostID: 1, name: "hostA", io: 1})
		require.Equal(t, rescode.OK, waitJoined(h))
		st, gap := h.ls.CheckOwnLease()
		assert.Equal(t, delta.OwnLeaseGood, st)
		assert.Less(t, gap, uint64(2))
		s := h.ls.Status()
		assert.Equal(t, uint64(1000), s.AcquireLastSuccess)
		assert.Equal(t, uint64(1020), s.RenewalLastSuccess)
		require.NoError(t, h.stop())
	})
}

// Renewals come every id_renewal_seconds (2N, or 2N+1 from whole-second
// rounding); docs/delta.md "Renewal loop".
func TestRenewalCadence(t *testing.T) {
	for _, io := range ioTimeouts {
		t.Run(fmt.Sprint("io", io), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				m := newLockspaceDisk(t, geo512, io)
				h := startHost(t, ctx, m, hostOpts{hostID: 1, name: "hostA", io: io})
				require.Equal(t, rescode.OK, waitJoined(h))
				sleep(seconds(40 * io))

				hist := h.ls.Renewals()
				require.GreaterOrEqual(t, len(hist), 16)
				assert.Equal(t, "timestamp=1000 read_ms=0 write_ms=0 next_timeouts=0 next_errors=0", hist[0].String())
				saw := map[uint64]bool{}
				for i := 1; i < len(hist); i++ {
					d := hist[i].Timestamp - hist[i-1].Timestamp
					saw[d] = true
					assert.Contains(t, []uint64{uint64(2 * io), uint64(2*io + 1)}, d, "interval %d", i)
					assert.Zero(t, hist[i].NextErrors+hist[i].NextTimeouts)
				}
				assert.True(t, saw[uint64(2*io)] && saw[uint64(2*io+1)], "both intervals occur: %v", saw)

				// What is on disk is the last renewal, with our io_timeout.
				rec, _ := leaseOnDisk(t, m, geo512, 1)
				s := h.ls.Status()
				assert.Equal(t, s.RenewalLastSuccess, rec.Timestamp)
				assert.Equal(t, hist[len(hist)-1].Timestamp, rec.Timestamp)
				assert.Equal(t, rescode.OK, s.RenewalLastResult)
				assert.Equal(t, uint64(1), s.HostGeneration)
				for _, c := range h.ownChecks() {
					assert.Equal(t, delta.OwnLeaseGood, c.state)
				}

				// Leaving releases the lease.
				require.NoError(t, h.stop())
				rec, _ = leaseOnDisk(t, m, geo512, 1)
				assert.Zero(t, rec.Timestamp)
				assert.True(t, h.ls.Status().Released)
			})
		})
	}
}

// Failing writes: retries about twice a second, warning from 6N, failure
// at 8N after the last success; no release afterwards; docs/timing.md "The numbers", docs/delta.md
// "Own-lease check".
func TestRenewalFailState(t *testing.T) {
	for _, io := range ioTimeouts {
		t.Run(fmt.Sprint("io", io), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				m := newLockspaceDisk(t, geo512, io)
				h := startHost(t, ctx, m, hostOpts{hostID: 1, name: "hostA", io: io})
				require.Equal(t, rescode.OK, waitJoined(h))
				sleep(seconds(5 * io))
				h.dev.failWrites.Store(true)
				last := h.ls.Status().RenewalLastSuccess
				writesBefore := h.dev.writes.Load()
				// Off the renewal grid: a retry due at the instant this
				// sleep ends would run beside the checks below.
				sleep(seconds(10*io) + 100*time.Millisecond)

				var firstWarn, firstFail uint64
				for _, c := range h.ownChecks() {
					if c.state == delta.OwnLeaseWarn && firstWarn == 0 {
						firstWarn = c.at
					}
					if c.state == delta.OwnLeaseFailed && firstFail == 0 {
						firstFail = c.at
					}
					if c.at-last < uint64(6*io) {
						assert.Equal(t, delta.OwnLeaseGood, c.state, "at %d", c.at)
					}
				}
				assert.Equal(t, last+uint64(6*io), firstWarn)
				assert.Equal(t, last+uint64(8*io), firstFail)
				s := h.ls.Status()
				assert.True(t, s.RenewFail)
				assert.Equal(t, last, s.RenewalLastSuccess)
				assert.Equal(t, rescode.ErrEIO, s.RenewalLastResult)
				assert.Zero(t, s.CorruptResult)

				// Retries every 0.5 s once the renewal is due (from last+2N).
				fails := h.dev.writes.Load() - writesBefore
				want := 2 * (int64(h.now()) - int64(last+uint64(2*io)))
				assert.InDelta(t, want, fails, 3)
				hist := h.ls.Renewals()
				assert.Equal(t, int(fails), hist[len(hist)-1].NextErrors)

				require.NoError(t, h.stop())
				assert.False(t, h.ls.Status().Released, "no release after a failed attempt")
				rec, _ := leaseOnDisk(t, m, geo512, 1)
				assert.Equal(t, last, rec.Timestamp)
			})
		})
	}
}

// Two hosts claim one host_id at once: exactly one wins, the other gets
// SANLK_HOSTID_BUSY (-262); docs/delta.md "Acquiring a host_id" (busy1/busy2).
func TestConcurrentClaims(t *testing.T) {
	for _, io := range ioTimeouts {
		t.Run(fmt.Sprint("io", io), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				m := newLockspaceDisk(t, geo512, io)
				a := startHost(t, ctx, m, hostOpts{hostID: 4, name: "hostA", io: io, base: 1000 * time.Second})
				b := startHost(t, ctx, m, hostOpts{hostID: 4, name: "hostB", io: io, base: 7777 * time.Second})
				ra, rb := waitJoined(a), waitJoined(b)
				assert.ElementsMatch(t, []rescode.Code{rescode.OK, rescode.ErrHostIDBusy}, []rescode.Code{ra, rb})
				winner := a
				if rb == rescode.OK {
					winner = b
				}
				rec, _ := leaseOnDisk(t, m, geo512, 4)
				assert.Equal(t, winner.name, diskfmt.NameString(rec.ResourceName[:]))

				// The winner keeps renewing without noticing anything.
				sleep(seconds(10 * io))
				s := winner.ls.Status()
				assert.Equal(t, rescode.OK, s.RenewalLastResult)
				assert.Zero(t, s.CorruptResult)
				require.NoError(t, winner.stop())
				loser := a
				if winner == a {
					loser = b
				}
				<-loser.exited
				assert.Equal(t, rescode.ErrHostIDBusy, rescode.CodeOf(loser.runErr))
			})
		})
	}
}

// A host_id held by a live host: the newcomer watches the lease for
// 8N+W, sees it change and gets -262 (busy1), without writing.
func TestClaimLiveHostID(t *testing.T) {
	for _, io := range ioTimeouts {
		t.Run(fmt.Sprint("io", io), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				m := newLockspaceDisk(t, geo512, io)
				a := startHost(t, ctx, m, hostOpts{hostID: 1, name: "hostA", io: io})
				require.Equal(t, rescode.OK, waitJoined(a))
				b := startHost(t, ctx, m, hostOpts{hostID: 1, name: "hostB", io: io})
				require.Equal(t, rescode.ErrHostIDBusy, waitJoined(b))
				assert.Equal(t, uint64(delta.HostDeadSeconds(io, 60)), b.now()-b.ls.Status().AcquireLastAttempt)
				assert.Zero(t, b.dev.writes.Load())
				assert.Equal(t, rescode.OK, a.ls.Status().RenewalLastResult)
				require.NoError(t, a.stop())
			})
		})
	}
}

// A host that stops renewing is LIVE, FAIL after 8N and DEAD only after
// 8N+W, measured on the observer's clock from when it saw the last
// change; then its host_id can be taken over; docs/delta.md "Host states", "Acquiring a host_id".
func TestDeadHost(t *testing.T) {
	for _, io := range ioTimeouts {
		t.Run(fmt.Sprint("io", io), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				m := newLockspaceDisk(t, geo512, io)
				// Very different clock origins: nothing may compare them.
				a := startHost(t, ctx, m, hostOpts{hostID: 1, name: "hostA", io: io, base: 100000 * time.Second})
				b := startHost(t, ctx, m, hostOpts{hostID: 2, name: "hostB", io: io, base: 50 * time.Second})
				require.Equal(t, rescode.OK, waitJoined(a))
				require.Equal(t, rescode.OK, waitJoined(b))
				sleep(seconds(8 * io))
				assert.Equal(t, delta.HostLive, b.ls.HostState(1))
				hs, err := b.ls.GetHosts(0)
				require.NoError(t, err)
				require.Len(t, hs, 2)

				a.dev.crash()
				lastTS := a.ls.Status().RenewalLastSuccess
				// Watch host 1 from host 2 once a second.
				type obs struct {
					at       uint64
					state    delta.HostState
					lastLive uint64
				}
				var seen []obs
				for range HostDeadSecondsPlus(io, 20) {
					sleep(time.Second)
					e, _ := b.ls.Host(1)
					seen = append(seen, obs{b.now(), b.ls.HostState(1), e.LastLive})
				}
				e, _ := b.ls.Host(1)
				assert.Equal(t, lastTS, e.Timestamp, "observer saw the last timestamp")
				lastLive := e.LastLive
				var failAt, deadAt uint64
				for _, o := range seen {
					// The observer may see the last renewal after the crash.
					since := o.at - o.lastLive
					switch {
					case since <= uint64(8*io):
						assert.Equal(t, delta.HostLive, o.state, "since %d", since)
					case since <= uint64(8*io+60):
						assert.Equal(t, delta.HostFail, o.state, "since %d", since)
					default:
						assert.Equal(t, delta.HostDead, o.state, "since %d", since)
					}
					if o.state == delta.HostFail && failAt == 0 {
						failAt = o.at
					}
					if o.state == delta.HostDead && deadAt == 0 {
						deadAt = o.at
					}
				}
				assert.Equal(t, lastLive+uint64(8*io)+1, failAt)
				assert.Equal(t, lastLive+uint64(8*io+60)+1, deadAt)

				// A crashed host's lease stays on disk; a new host takes
				// host_id 1 over after watching it unchanged for 8N+W.
				require.NoError(t, a.stop())
				assert.False(t, a.ls.Status().Released)
				c := startHost(t, ctx, m, hostOpts{hostID: 1, name: "hostC", io: io})
				require.Equal(t, rescode.OK, waitJoined(c))
				cs := c.ls.Status()
				assert.Equal(t, uint64(8*io+60), cs.AcquireLastSuccess-cs.AcquireLastAttempt, "watched 8N+W")
				rec, _ := leaseOnDisk(t, m, geo512, 1)
				assert.Equal(t, uint64(2), rec.OwnerGeneration)
				assert.Equal(t, "hostC", diskfmt.NameString(rec.ResourceName[:]))
				// The observer sees the new owner change: LIVE again.
				sleep(seconds(4 * io))
				assert.Equal(t, delta.HostLive, b.ls.HostState(1))
				hs, err = b.ls.GetHosts(1)
				require.NoError(t, err)
				require.Len(t, hs, 1)
				assert.Equal(t, uint64(2), hs[0].Generation)
				require.NoError(t, c.stop())
				require.NoError(t, b.stop())
			})
		})
	}
}

func HostDeadSecondsPlus(io, extra int) int { return delta.HostDeadSeconds(io, 60) + extra }

// A host already running when we join is UNKNOWN until its lease changes;
// a released host is FREE; get_hosts before processing is -EAGAIN (docs/delta.md
// "Host states"–"get_hosts").
func TestHostStatesOnJoin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		m := newLockspaceDisk(t, geo512, 1)
		a := startHost(t, ctx, m, hostOpts{hostID: 1, name: "hostA", io: 1})
		require.Equal(t, rescode.OK, waitJoined(a))
		b := startHost(t, ctx, m, hostOpts{hostID: 2, name: "hostB", io: 1})
		_, err := b.ls.GetHosts(0)
		assert.Equal(t, rescode.Code(-11), rescode.CodeOf(err))
		require.Equal(t, rescode.OK, waitJoined(b))
		_, err = b.ls.GetHosts(0)
		assert.Equal(t, rescode.Code(-11), rescode.CodeOf(err), "not processed yet")

		var states []delta.HostState
		for range 6 {
			sleep(time.Second)
			states = append(states, b.ls.HostState(1))
		}
		assert.Equal(t, delta.HostUnknown, states[0])
		assert.Equal(t, delta.HostLive, states[len(states)-1])
		assert.Equal(t, delta.HostLive, b.ls.HostState(2), "ourselves")
		hs, err := b.ls.GetHosts(5)
		require.NoError(t, err)
		assert.Equal(t, []delta.HostInfo{{HostID: 5, State: delta.HostFree}}, hs)
		hs, err = b.ls.GetHosts(2001)
		require.NoError(t, err)
		assert.Empty(t, hs)

		require.NoError(t, a.stop())
		sleep(4 * time.Second)
		assert.Equal(t, delta.HostFree, b.ls.HostState(1))
		hs, err = b.ls.GetHosts(0)
		require.NoError(t, err)
		require.Len(t, hs, 1)
		assert.Equal(t, uint64(2), hs[0].HostID)
		st := b.ls.HostStatuses()
		require.Len(t, st, 2, "a released host stays listed")
		assert.Zero(t, st[0].Timestamp)
		assert.Equal(t, "hostA", st[0].OwnerName)
		require.NoError(t, b.stop())
	})
}

// A renewal whose read hangs fails with -202 after N seconds and counts as
// a timeout; a hung write times out after host_dead_seconds; docs/timing.md "Per-I/O timeouts",
// docs/delta.md "Renewal history".
func TestIOHang(t *testing.T) {
	for _, io := range ioTimeouts {
		t.Run(fmt.Sprint("io", io), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newLockspaceDisk(t, geo512, io)
				dev := newFaultDev(m)
				clk := clock.NewAt(500 * time.Second)
				l := delta.Lease{Dev: dev, Geometry: geo512, Space: space, HostID: 2,
					Timing: delta.NewTiming(io, 0), Clock: clk}
				acq, err := l.Acquire(t.Context(), "hostA")
				require.NoError(t, err)

				dev.hangReads.Store(true)
				start := clk.Now()
				out, err := l.Renew(t.Context(), delta.RenewInput{Last: acq.Leader, PrevOK: true})
				assert.Equal(t, rescode.ErrAIOTimeout, rescode.CodeOf(err))
				assert.Equal(t, seconds(io), clk.Now()-start)
				assert.Nil(t, out.Area)
				dev.hangReads.Store(false)

				dev.hangWrites.Store(true)
				start = clk.Now()
				out, err = l.Renew(t.Context(), delta.RenewInput{Last: acq.Leader, PrevOK: false})
				assert.Equal(t, rescode.ErrAIOTimeout, rescode.CodeOf(err))
				assert.Equal(t, seconds(delta.HostDeadSeconds(io, 60)), clk.Now()-start)
				assert.NotNil(t, out.Area, "the read part succeeded")
				dev.hangWrites.Store(false)

				// Cancelling the caller does not cut a running I/O short.
				dev.hangReads.Store(true)
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				start = clk.Now()
				_, err = l.Renew(ctx, delta.RenewInput{Last: acq.Leader})
				assert.Equal(t, rescode.ErrAIOTimeout, rescode.CodeOf(err))
				assert.Equal(t, seconds(io), clk.Now()-start)
			})
		})
	}
}

// In the runner a hung read is counted in next_timeouts of the last good
// entry, and the lockspace recovers when the disk comes back.
func TestRunnerReadTimeouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		m := newLockspaceDisk(t, geo512, 1)
		h := startHost(t, ctx, m, hostOpts{hostID: 1, name: "hostA", io: 1})
		require.Equal(t, rescode.OK, waitJoined(h))
		sleep(4 * time.Second)
		h.dev.hangReads.Store(true)
		sleep(4 * time.Second)
		assert.Equal(t, rescode.ErrAIOTimeout, h.ls.Status().RenewalLastResult)
		h.dev.hangReads.Store(false)
		sleep(3 * time.Second)
		assert.Equal(t, rescode.OK, h.ls.Status().RenewalLastResult)
		var timeouts int
		for _, e := range h.ls.Renewals() {
			timeouts += e.NextTimeouts
			assert.Zero(t, e.NextErrors)
		}
		assert.GreaterOrEqual(t, timeouts, 2)
		require.NoError(t, h.stop())
	})
}

// Someone overwrote our lease: RENEW_OWNER, sticky corrupt result, and the
// own-lease check fails at once; docs/delta.md "One renewal", "Corrupt lease".
func TestRenewOwnerCorrupt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		m := newLockspaceDisk(t, geo512, 1)
		h := startHost(t, ctx, m, hostOpts{hostID: 1, name: "hostA", io: 1})
		require.Equal(t, rescode.OK, waitJoined(h))
		sleep(3 * time.Second)
		rec, _ := leaseOnDisk(t, m, geo512, 1)
		rec.ResourceName = diskfmt.MustName("intruder")
		m.Load(sealed(rec, 512), 0)
		sleep(3 * time.Second)
		s := h.ls.Status()
		assert.Equal(t, rescode.ErrRenewOwner, s.CorruptResult)
		st, _ := h.ls.CheckOwnLease()
		assert.Equal(t, delta.OwnLeaseCorrupt, st)
		require.NoError(t, h.stop())
		assert.False(t, h.ls.Status().Released)
	})
}

// Freed behind our back (direct release_id): RENEW_DIFF.
func TestRenewDiff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		m := newLockspaceDisk(t, geo512, 1)
		h := startHost(t, ctx, m, hostOpts{hostID: 1, name: "hostA", io: 1})
		require.Equal(t, rescode.OK, waitJoined(h))
		sleep(3 * time.Second)
		rec, _ := leaseOnDisk(t, m, geo512, 1)
		m.Load(sealed(delta.NewReleaseRecord(rec), 512), 0)
		sleep(3 * time.Second)
		assert.Equal(t, rescode.ErrRenewDiff, h.ls.Status().CorruptResult)
		require.NoError(t, h.stop())
	})
}

// Marked dead by another host (sanlock 5.x DEAD_EXT): the lockspace fails
// at once with -263; a later join over the mark takes the next generation
// and clears the flag (unused1 stays, as 5.1.1 leaves it).
func TestDeadExtMark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		m := newLockspaceDisk(t, geo512, 1)
		h := startHost(t, ctx, m, hostOpts{hostID: 1, name: "hostA", io: 1})
		require.Equal(t, rescode.OK, waitJoined(h))
		sleep(3 * time.Second)
		rec, _ := leaseOnDisk(t, m, geo512, 1)
		rec.Flags |= diskfmt.LeaderDeadExt
		rec.Unused1 = diskfmt.DeadExtMark
		m.Load(sealed(rec, 512), 0)
		sleep(3 * time.Second)
		assert.Equal(t, rescode.ErrDeadExt, h.ls.Status().CorruptResult)
		st, _ := h.ls.CheckOwnLease()
		assert.Equal(t, delta.OwnLeaseCorrupt, st)
		require.NoError(t, h.stop())

		before, _ := leaseOnDisk(t, m, geo512, 1)
		h2 := startHost(t, ctx, m, hostOpts{hostID: 1, name: "hostA", io: 1})
		assert.Equal(t, rescode.OK, waitJoined(h2))
		after, _ := leaseOnDisk(t, m, geo512, 1)
		assert.Equal(t, before.OwnerGeneration+1, after.OwnerGeneration)
		assert.False(t, after.DeadExt())
		assert.Equal(t, diskfmt.DeadExtMark, after.Unused1)
		require.NoError(t, h2.stop())
	})
}

// set_host DEAD_EXT from host 1 on host 2's lease: the generation must be
// host 2's (or 0), the record gets the flag and the mark, the rest of the
// sector stays; host 2's next renewal fails with -263.
func TestSetHostDeadExt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		m := newLockspaceDisk(t, geo512, 1)
		a := startHost(t, ctx, m, hostOpts{hostID: 1, name: "hostA", io: 1})
		b := startHost(t, ctx, m, hostOpts{hostID: 2, name: "hostB", io: 1})
		require.Equal(t, rescode.OK, waitJoined(a))
		require.Equal(t, rescode.OK, waitJoined(b))
		sleep(3 * time.Second)
		rec, _ := leaseOnDisk(t, m, geo512, 2)

		_, err := a.ls.SetHostDeadExt(ctx, 2, rec.OwnerGeneration+1)
		assert.Equal(t, rescode.ErrWrongGeneration, rescode.CodeOf(err))
		_, err = a.ls.SetHostDeadExt(ctx, 0, 0)
		assert.Equal(t, rescode.ErrEINVAL, rescode.CodeOf(err))
		_, err = a.ls.SetHostDeadExt(ctx, 2001, 0)
		assert.Equal(t, rescode.ErrEINVAL, rescode.CodeOf(err))
		cur, _ := leaseOnDisk(t, m, geo512, 2)
		assert.False(t, cur.DeadExt(), "nothing written")

		out, err := a.ls.SetHostDeadExt(ctx, 2, rec.OwnerGeneration)
		require.NoError(t, err)
		assert.True(t, out.DeadExt())
		assert.Equal(t, diskfmt.DeadExtMark, out.Unused1)
		sleep(3 * time.Second)
		assert.Equal(t, rescode.ErrDeadExt, b.ls.Status().CorruptResult)
		assert.Equal(t, rescode.OK, a.ls.Status().RenewalLastResult, "the marker goes on")
		require.NoError(t, a.stop())
		_ = b.stop()
	})
}

// An acquire waiting on a held lease is aborted by ctx with -201.
func TestAcquireAbort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		m := newLockspaceDisk(t, geo512, 1)
		a := startHost(t, ctx, m, hostOpts{hostID: 1, name: "hostA", io: 1})
		require.Equal(t, rescode.OK, waitJoined(a))
		b := startHost(t, ctx, m, hostOpts{hostID: 1, name: "hostB", io: 1})
		sleep(10 * time.Second)
		require.Equal(t, rescode.ErrGeneric, rescode.CodeOf(b.stop()))
		assert.Equal(t, rescode.ErrGeneric, b.ls.Status().AcquireLastResult)
		require.NoError(t, a.stop())
	})
}

// Geometry is read from sector 0 when not given; host_id beyond max_hosts
// is -231; a missing lockspace is -223; docs/delta.md "Lockspace start-up".
func TestJoinSizes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		g4k := diskfmt.Geometry{SectorSize: 4096, AlignSize: diskfmt.Align1M, MaxHosts: 250}
		m := newLockspaceDisk(t, g4k, 1)
		h := startHost(t, ctx, m, hostOpts{hostID: 251, name: "hostA", io: 1})
		assert.Equal(t, rescode.ErrAddLSInvalidHostID, waitJoined(h))
		h = startHost(t, ctx, m, hostOpts{hostID: 250, name: "hostA", io: 1})
		require.Equal(t, rescode.OK, waitJoined(h))
		s := h.ls.Status()
		assert.Equal(t, 4096, s.SectorSize)
		assert.Equal(t, diskfmt.Align1M, s.AlignSize)
		require.NoError(t, h.stop())

		blank := newLockspaceDisk(t, geo512, 1)
		blank.Load(make([]byte, 512), 0)
		h = startHost(t, ctx, blank, hostOpts{hostID: 1, name: "hostA", io: 1})
		assert.Equal(t, rescode.ErrLeaderMagic, waitJoined(h))
	})
}

// NODELAY: no wait at all, on a free lease and on one another host
// holds (whose owner is then not seen: the danger docs/delta.md "NODELAY"
// describes); the record written and read back is the same as without it.
func TestAcquireNoDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newLockspaceDisk(t, geo512, 10)
		dev := newFaultDev(m)
		clk := clock.NewAt(500 * time.Second)
		l := delta.Lease{Dev: dev, Geometry: geo512, Space: space, HostID: 3,
			Timing: delta.NewTiming(10, 0), Clock: clk, NoDelay: true}
		start := clk.Now()
		acq, err := l.Acquire(t.Context(), "hostA")
		require.NoError(t, err)
		assert.Zero(t, clk.Now()-start, "no short delay")
		assert.Equal(t, int64(2), dev.reads.Load())
		assert.Equal(t, uint64(1), acq.Leader.OwnerGeneration)

		// hostA's lease is live; hostB takes the slot at once.
		l2 := l
		l2.Clock = clock.NewAt(600 * time.Second)
		start = l2.Clock.Now()
		acq2, err := l2.Acquire(t.Context(), "hostB")
		require.NoError(t, err)
		assert.Zero(t, l2.Clock.Now()-start, "no long delay")
		assert.Equal(t, uint64(2), acq2.Leader.OwnerGeneration)
		rec, _ := leaseOnDisk(t, m, geo512, 3)
		assert.Equal(t, "hostB", diskfmt.NameString(rec.ResourceName[:]))
	})
}

// SET_CONFIG IO_TIMEOUT: a lower io_timeout rules the own timing from the
// renewal that writes it, a higher one from after it; the lease carries
// the new value and the renewals come at the new interval.
func TestSetIOTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newLockspaceDisk(t, geo512, 4)
		h := startHost(t, t.Context(), m, hostOpts{hostID: 1, name: "host1", io: 4})
		require.Equal(t, rescode.OK, waitJoined(h))
		assert.Equal(t, rescode.ErrEINVAL, rescode.CodeOf(h.ls.SetIOTimeout(0)))
		assert.Equal(t, rescode.ErrEINVAL, rescode.CodeOf(h.ls.SetIOTimeout(256)))

		require.NoError(t, h.ls.SetIOTimeout(2))
		assert.Equal(t, 4, h.ls.Timing().IOTimeout, "not before the next renewal")
		time.Sleep(10 * time.Second)
		assert.Equal(t, 2, h.ls.Timing().IOTimeout)
		rec, _ := leaseOnDisk(t, m, geo512, 1)
		assert.Equal(t, uint16(2), rec.IOTimeout)
		// Renewals every 4 s now.
		ts := rec.Timestamp
		time.Sleep(4 * time.Second)
		rec, _ = leaseOnDisk(t, m, geo512, 1)
		assert.InDelta(t, float64(ts+4), float64(rec.Timestamp), 1)

		require.NoError(t, h.ls.SetIOTimeout(6))
		time.Sleep(5 * time.Second)
		rec, _ = leaseOnDisk(t, m, geo512, 1)
		assert.Equal(t, uint16(6), rec.IOTimeout)
		assert.Equal(t, 6, h.ls.Timing().IOTimeout)
		assert.Equal(t, 6, h.ls.Status().IOTimeout)
		st, _ := h.ls.CheckOwnLease()
		assert.False(t, st.Failed())
		require.NoError(t, h.stop())
	})
}
