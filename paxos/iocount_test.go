package paxos

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

func ops(ss ...any) []ioOp {
	var out []ioOp
	for i := 0; i < len(ss); i += 3 {
		out = append(out, ioOp{Write: ss[i].(string) == "W", Len: ss[i+1].(int), Off: int64(ss[i+2].(int))})
	}
	return out
}

// TestIOCounts checks the I/O of uncontended operations against the strace
// of docs/paxos.md "I/O counts" (512/1M, N=2000): 6 I/Os to acquire, 3 to release, and
// the SH, convert, LVB and blocked variants.
func TestIOCounts(t *testing.T) {
	const MiB = 1 << 20
	c := newCluster(t, geo512, 1, 0)
	var cd1, cd2 *countDev
	h1 := c.host(1, 1, func(_ int, d diskfmt.Device) diskfmt.Device { cd1 = &countDev{Device: d, base: c.off}; return cd1 })
	h2 := c.host(2, 1, func(_ int, d diskfmt.Device) diskfmt.Device { cd2 = &countDev{Device: d, base: c.off}; return cd2 })

	acquireEX := ops("R", MiB, 0, "W", 512, 1024, "R", MiB, 0, "W", 512, 1024, "R", MiB, 0, "W", 512, 0)
	releaseEX := ops("W", 512, 1024, "R", 512, 0, "W", 512, 0)

	// Twice: the first acquire of a fresh lease and a later one.
	for round := 1; round <= 2; round++ {
		r, err := h1.Acquire(bg, AcquireRequest{})
		require.NoError(t, err)
		assert.Equal(t, acquireEX, cd1.take(), "EX acquire round %d", round)
		require.NoError(t, r.Release(bg, ReleaseOptions{}))
		assert.Equal(t, releaseEX, cd1.take(), "EX release round %d", round)
	}
	d, _ := c.hostBlock(0, 1)
	assert.Equal(t, uint64(2001), d.Mbal, "second ballot of host 1 uses mbal 2001")

	// LVB: one more read of sector 2002 after the leader write; a dirty LVB
	// is written first at release.
	r, err := h1.Acquire(bg, AcquireRequest{LVB: true})
	require.NoError(t, err)
	assert.Equal(t, append(acquireEX, ops("R", 512, 2002*512)...), cd1.take())
	require.NoError(t, r.SetLVB([]byte("x")))
	require.NoError(t, r.Release(bg, ReleaseOptions{}))
	assert.Equal(t, append(ops("W", 512, 2002*512), releaseEX...), cd1.take())

	// Blocked by a live owner: one full read, one delta lease read.
	r, err = h1.Acquire(bg, AcquireRequest{})
	require.NoError(t, err)
	cd1.take()
	before := c.world.reads.Load()
	_, err = h2.Acquire(bg, AcquireRequest{})
	assert.Equal(t, rescode.ErrAcquireIDLive, code(err))
	assert.Equal(t, ops("R", MiB, 0), cd2.take())
	assert.Equal(t, int64(1), c.world.reads.Load()-before)
	require.NoError(t, r.Release(bg, ReleaseOptions{}))
	cd1.take()

	// SH acquire: the 6, then the combined write, leader read, leader write.
	// SH release: one write.
	r, err = h2.Acquire(bg, AcquireRequest{Shared: true})
	require.NoError(t, err)
	assert.Equal(t, ops("R", MiB, 0, "W", 512, 1536, "R", MiB, 0, "W", 512, 1536, "R", MiB, 0, "W", 512, 0,
		"W", 512, 1536, "R", 512, 0, "W", 512, 0), cd2.take())

	// SH→EX: 6 ballot I/Os carrying the mode block, then the own sector.
	require.NoError(t, r.Convert(bg, ConvertRequest{}))
	assert.Equal(t, ops("R", MiB, 0, "W", 512, 1536, "R", MiB, 0, "W", 512, 1536, "R", MiB, 0, "W", 512, 0,
		"W", 512, 1536), cd2.take())
	// EX→SH: combined write, leader read, leader write.
	require.NoError(t, r.Convert(bg, ConvertRequest{Shared: true}))
	assert.Equal(t, ops("W", 512, 1536, "R", 512, 0, "W", 512, 0), cd2.take())
	require.NoError(t, r.Release(bg, ReleaseOptions{}))
	assert.Equal(t, ops("W", 512, 1536), cd2.take())
}

// TestIOCountsSmallLease: with N=4 the ballot reads shrink to 4 KiB
// (roundup_pow2(6) sectors), the full read stays the align size.
func TestIOCountsSmallLease(t *testing.T) {
	c := newCluster(t, geo512, 1, 4)
	var cd *countDev
	h := c.host(3, 1, func(_ int, d diskfmt.Device) diskfmt.Device { cd = &countDev{Device: d, base: c.off}; return cd })
	r, err := h.Acquire(bg, AcquireRequest{})
	require.NoError(t, err)
	require.NoError(t, r.Release(bg, ReleaseOptions{}))
	assert.Equal(t, ops("R", 1<<20, 0, "W", 512, 2048, "R", 4096, 0, "W", 512, 2048, "R", 4096, 0, "W", 512, 0,
		"W", 512, 2048, "R", 512, 0, "W", 512, 0), cd.take())
}
