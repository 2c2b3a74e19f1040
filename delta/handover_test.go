package delta_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/rescode"
)

// A paused lockspace renews nothing and, when its runner stops, does not
// release; a RunAdopted elsewhere continues with the same generation and
// the renewal cadence unbroken (docs/upgrade.md "Adopting lockspaces").
func TestAdoptContinuesRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		m := newLockspaceDisk(t, geo512, 1)
		h := startHost(t, ctx, m, hostOpts{hostID: 1, name: "hostA", io: 1})
		require.Equal(t, rescode.OK, waitJoined(h))
		sleep(seconds(9))

		// Pause and Unpause: renewals go on.
		require.NoError(t, h.ls.Pause(ctx))
		_, err := h.ls.HandoverState()
		require.NoError(t, err)
		h.ls.Unpause()
		_, err = h.ls.HandoverState()
		require.ErrorIs(t, err, delta.ErrNoHandover, "not paused")
		sleep(seconds(5))
		// Pause right after a renewal, so the new runner has nothing due.
		for reads := h.ls.Status().Reads; h.ls.Status().Reads == reads; {
			sleep(50 * time.Millisecond)
		}

		require.NoError(t, h.ls.Pause(ctx))
		st, err := h.ls.HandoverState()
		require.NoError(t, err)
		writes := h.dev.writes.Load()
		require.NoError(t, h.stop(), "a paused runner stops without releasing")
		assert.Equal(t, writes, h.dev.writes.Load())
		rec, _ := leaseOnDisk(t, m, geo512, 1)
		assert.Equal(t, st.Leader, rec)
		assert.Equal(t, st.LastSuccess, rec.Timestamp)

		// The new process: the same clock (CLOCK_MONOTONIC), a new runner.
		dev := newFaultDev(m)
		ls2, err := delta.New(delta.Config{Dev: dev, Space: space, HostID: 1, HostName: "hostA", IOTimeout: 1,
			Geometry: geo512, Clock: h.clock})
		require.NoError(t, err)
		bad := st
		bad.Leader.OwnerID = 2
		require.Error(t, ls2.CheckAdopt(bad))
		require.NoError(t, ls2.CheckAdopt(st))
		ctx2, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- ls2.RunAdopted(ctx2, st) }()
		<-ls2.Joined()
		s := ls2.Status()
		assert.True(t, s.Joined)
		assert.Equal(t, uint64(1), s.HostGeneration)
		assert.Equal(t, st.LastSuccess, s.RenewalLastSuccess)
		sleep(seconds(20))

		hist := ls2.Renewals()
		require.Greater(t, len(hist), len(st.History)+5)
		for i := 1; i < len(hist); i++ {
			d := hist[i].Timestamp - hist[i-1].Timestamp
			assert.Contains(t, []uint64{2, 3}, d, "interval %d: %v", i, hist)
		}
		st2, gap := ls2.CheckOwnLease()
		assert.Equal(t, delta.OwnLeaseGood, st2, "gap %d", gap)
		rec, _ = leaseOnDisk(t, m, geo512, 1)
		assert.Equal(t, uint64(1), rec.OwnerGeneration)
		assert.Equal(t, ls2.Status().RenewalLastSuccess, rec.Timestamp)
		cancel()
		require.NoError(t, <-done)
		rec, _ = leaseOnDisk(t, m, geo512, 1)
		assert.Zero(t, rec.Timestamp, "the new runner releases on stop")
	})
}

// The host table travels with the lockspace: right after RunAdopted the
// new runner reports the same entries (times included) and states as the
// old one did, before any read of its own; a table with a time in the
// future or out of order is refused (docs/upgrade.md "Adopting lockspaces").
func TestAdoptHostTable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		m := newLockspaceDisk(t, geo512, 1)
		h := startHost(t, ctx, m, hostOpts{hostID: 1, name: "hostA", io: 1, base: 1000*time.Second + 100*time.Millisecond})
		h2 := startHost(t, ctx, m, hostOpts{hostID: 2, name: "hostB", io: 1})
		require.Equal(t, rescode.OK, waitJoined(h))
		require.Equal(t, rescode.OK, waitJoined(h2))
		for range 6 {
			sleep(seconds(2))
			h.ls.ProcessHosts()
		}
		// A renewal read, not processed yet: pause right after it, before
		// the main loop's next pass (the passes fall 0.1 s after a whole
		// second of the clock, the renewals on its quarter seconds).
		for reads := h.ls.Status().Reads; h.ls.Status().Reads == reads; {
			sleep(50 * time.Millisecond)
		}
		require.NoError(t, h.ls.Pause(ctx))
		st, err := h.ls.HandoverState()
		require.NoError(t, err)
		require.NotNil(t, st.Hosts)
		require.NotNil(t, st.Hosts.Staged, "the unprocessed read travels")
		beforeStaged := h.ls.HostStatuses()
		_, ok := h.ls.ProcessHosts()
		require.True(t, ok)
		before := h.ls.HostStatuses()
		require.Len(t, before, 2)
		beforeInfo, err := h.ls.GetHosts(0)
		require.NoError(t, err)
		require.NoError(t, h.stop())

		newLS := func() *delta.Lockspace {
			ls, err := delta.New(delta.Config{Dev: newFaultDev(m), Space: space, HostID: 1, HostName: "hostA",
				IOTimeout: 1, Geometry: geo512, Clock: h.clock})
			require.NoError(t, err)
			return ls
		}
		ls2 := newLS()
		for _, mut := range []func(s *delta.HostTableState){
			func(s *delta.HostTableState) { s.LastCheck += 100 },
			func(s *delta.HostTableState) { s.Hosts[1].LastLive = s.LastCheck + 1 },
			func(s *delta.HostTableState) { s.Hosts[0].HostID = 2 },
			func(s *delta.HostTableState) { s.FirstCheck = 0 },
			func(s *delta.HostTableState) {
				s.Staged = &delta.StagedRead{Count: 1, Records: make([]delta.StagedHost, 2)}
			},
		} {
			bad := st
			ht := *st.Hosts
			ht.Hosts = append([]delta.HostStatus(nil), ht.Hosts...)
			mut(&ht)
			bad.Hosts = &ht
			require.Error(t, ls2.CheckAdopt(bad))
		}
		require.NoError(t, ls2.CheckAdopt(st))
		ctx2, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- ls2.RunAdopted(ctx2, st) }()
		<-ls2.Joined()
		assert.Equal(t, beforeStaged, ls2.HostStatuses())
		_, ok = ls2.ProcessHosts()
		require.True(t, ok, "the staged read is processed by the new runner")
		assert.Equal(t, before, ls2.HostStatuses())
		info, err := ls2.GetHosts(0)
		require.NoError(t, err)
		assert.Equal(t, beforeInfo, info)
		assert.Equal(t, delta.HostLive, ls2.HostState(2))
		cancel()
		require.NoError(t, <-done)

		// Without a table (an older image's state) the table starts empty.
		ls3 := newLS()
		st.Hosts = nil
		go func() { _ = ls3.RunAdopted(ctx, st) }()
		<-ls3.Joined()
		_, err = ls3.GetHosts(0)
		assert.ErrorIs(t, err, rescode.ErrEAGAIN)
		require.NoError(t, h2.stop())
	})
}
