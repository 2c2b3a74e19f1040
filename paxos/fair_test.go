package paxos

import (
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

// TestMbalSpread: with Fairness.MbalSpread an acquire that met nobody keeps
// sanlock's ballot numbers (1, 2001); after an acquire that found the
// lease owned by another host, the next ballot's number keeps the host's
// residue mod max_hosts and is at least the usual one (docs/paxos.md
// "Fairness under contention"); an uncontended grant clears the mark.
func TestMbalSpread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, geo512, 1, 8)
		h1, h2 := c.host(1, 1, nil), c.host(2, 1, nil)
		h1.Host.Fairness.MbalSpread, h2.Host.Fairness.MbalSpread = SuggestedMbalSpread, SuggestedMbalSpread
		mbal := func(id uint64) uint64 {
			d, _ := c.hostBlock(0, id)
			return d.Mbal
		}

		for _, want := range []uint64{1, 2001} {
			r, err := h1.Acquire(bg, AcquireRequest{})
			require.NoError(t, err)
			assert.Equal(t, want, mbal(1))
			require.NoError(t, r.Release(bg, ReleaseOptions{}))
		}

		r1, err := h1.Acquire(bg, AcquireRequest{})
		require.NoError(t, err)
		_, err = h2.Acquire(bg, AcquireRequest{})
		require.Equal(t, rescode.ErrAcquireIDLive, code(err))
		require.NoError(t, r1.Release(bg, ReleaseOptions{}))

		// host 2 met host 1: spread. Draw until a k above 0 shows (the
		// chance of 0 is 1/32 per acquire).
		spread := false
		for range 20 {
			usual := ChooseMbal(max(mbal(1), mbal(2)), diskfmt.DefaultMaxHosts, 2)
			r2, err := h2.Acquire(bg, AcquireRequest{})
			require.NoError(t, err)
			m := mbal(2)
			assert.Equal(t, uint64(2), m%diskfmt.DefaultMaxHosts, "residue of host 2")
			assert.GreaterOrEqual(t, m, usual)
			spread = spread || m > usual
			require.NoError(t, r2.Release(bg, ReleaseOptions{}))
			if spread {
				break
			}
			// the grant was uncontended: meet host 1 again
			r1, err := h1.Acquire(bg, AcquireRequest{})
			require.NoError(t, err)
			_, err = h2.Acquire(bg, AcquireRequest{})
			require.Equal(t, rescode.ErrAcquireIDLive, code(err))
			require.NoError(t, r1.Release(bg, ReleaseOptions{}))
		}
		assert.True(t, spread, "no ballot number above the usual one in 20 tries")

		// that grant met nobody: the next one uses the usual number
		usual := ChooseMbal(max(mbal(1), mbal(2)), diskfmt.DefaultMaxHosts, 2)
		r2, err := h2.Acquire(bg, AcquireRequest{})
		require.NoError(t, err)
		assert.Equal(t, usual, mbal(2))
		require.NoError(t, r2.Release(bg, ReleaseOptions{}))
	})
}
