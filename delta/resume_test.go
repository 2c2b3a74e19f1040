package delta_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/rescode"
)

// A paused lockspace renews nothing and, when its runner stops, does not
// release; a RunResumed elsewhere continues with the same generation and
// the renewal cadence unbroken (docs/upgrade.md "Adopting lockspaces").
func TestResumeContinuesRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		m := newLockspaceDisk(t, geo512, 1)
		h := startHost(t, ctx, m, hostOpts{hostID: 1, name: "hostA", io: 1})
		require.Equal(t, rescode.OK, waitJoined(h))
		sleep(seconds(9))

		// Pause and Unpause: renewals go on.
		require.NoError(t, h.ls.Pause(ctx))
		_, err := h.ls.Resumable()
		require.NoError(t, err)
		h.ls.Unpause()
		_, err = h.ls.Resumable()
		require.ErrorIs(t, err, delta.ErrNotResumable, "not paused")
		sleep(seconds(5))

		require.NoError(t, h.ls.Pause(ctx))
		st, err := h.ls.Resumable()
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
		require.Error(t, ls2.CheckResume(bad))
		require.NoError(t, ls2.CheckResume(st))
		ctx2, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- ls2.RunResumed(ctx2, st) }()
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
