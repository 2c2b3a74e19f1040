package paxos

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/diskfmt"
)

// handoverGuard is a WriteGuard with the rules of a handed-over pending
// request (handover/serving Slot): cancel succeeds only before the first
// write, and a write goes out only if no cancel came first.
type handoverGuard struct {
	mu        sync.Mutex
	cancelled bool
	written   bool
	cancel    context.CancelFunc
}

func (g *handoverGuard) BeforeWrite() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cancelled {
		return false
	}
	g.written = true
	return true
}

// tryCancel is the handover's cancel: it reports whether it cancelled.
func (g *handoverGuard) tryCancel() bool {
	g.mu.Lock()
	if g.written {
		g.mu.Unlock()
		return false
	}
	g.cancelled = true
	g.mu.Unlock()
	g.cancel()
	return true
}

func guarded() (context.Context, *handoverGuard) {
	ctx, cancel := context.WithCancel(context.Background())
	g := &handoverGuard{cancel: cancel}
	return ctx, g
}

func writes(ops []ioOp) int {
	n := 0
	for _, o := range ops {
		if o.Write {
			n++
		}
	}
	return n
}

// TestGuardCancelBeforeWrite: an acquire waiting on an owner whose
// liveness is being checked has written nothing; cancelled there through
// its guard it ends with an error and still has written nothing, and the
// lease is as before (docs/upgrade.md "Pending requests").
func TestGuardCancelBeforeWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, geo512, 1, 8)
		var cd2 *countDev
		h1 := c.host(1, 1, nil)
		h2 := c.host(2, 1, func(_ int, d diskfmt.Device) diskfmt.Device { cd2 = &countDev{Device: d, base: c.off}; return cd2 })
		_, err := h1.Acquire(bg, AcquireRequest{})
		require.NoError(t, err)
		before := c.leader(0)
		c.world.kill(1)
		time.Sleep(2 * time.Second) // its delta lease has stopped changing

		ctx, g := guarded()
		done := make(chan error, 1)
		go func() {
			_, err := h2.Acquire(ctx, AcquireRequest{Guard: g})
			done <- err
		}()
		// Well inside host_dead_seconds: the acquire waits on the owner.
		time.Sleep(10 * time.Second)
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("acquire ended: %v", err)
		default:
		}
		require.Greater(t, c.world.reads.Load(), int64(1), "the acquire checks the owner's liveness")
		assert.True(t, g.tryCancel(), "an acquire that has not written is cancelled")
		err = <-done
		require.Error(t, err)
		ops := cd2.take()
		assert.NotEmpty(t, ops)
		assert.Zero(t, writes(ops), "a cancelled acquire wrote %v", ops)
		assert.Equal(t, before, c.leader(0), "the leader is unchanged")
		d, _ := c.hostBlock(0, 2)
		assert.Equal(t, diskfmt.Dblock{}, d, "host 2's dblock is untouched")
	})
}

// TestGuardCancelAfterWrite: a cancel that comes after the acquire's
// first write is refused and the acquire completes; one that comes just
// before it (after the first read) stops the acquire with nothing written.
func TestGuardCancelAfterWrite(t *testing.T) {
	for _, after := range []bool{true, false} {
		c := newCluster(t, geo512, 1, 8)
		var g *handoverGuard
		var cancelled bool
		var cd *countDev
		h := c.host(1, 1, func(_ int, d diskfmt.Device) diskfmt.Device {
			cd = &countDev{Device: d, base: c.off}
			return &hookDev{Device: cd, hook: func(write bool, n int) {
				if n == 1 && write == after {
					cancelled = g.tryCancel()
				}
			}}
		})
		var ctx context.Context
		ctx, g = guarded()
		r, err := h.Acquire(ctx, AcquireRequest{Guard: g})
		ops := cd.take()
		if after {
			assert.False(t, cancelled, "an acquire that has written is not cancelled")
			require.NoError(t, err)
			assert.Equal(t, uint64(1), r.Leader.OwnerID)
			assert.Equal(t, 3, writes(ops), "the whole ballot and the commit: %v", ops)
			continue
		}
		assert.True(t, cancelled, "an acquire that has only read is cancelled")
		require.Error(t, err)
		assert.Zero(t, writes(ops), "%v", ops)
		d, _ := c.hostBlock(0, 1)
		assert.Equal(t, diskfmt.Dblock{}, d)
		assert.Equal(t, uint64(0), c.leader(0).Lver)
	}
}

// hookDev calls hook after each read and write, with the count of that
// kind so far.
type hookDev struct {
	diskfmt.Device
	reads, writes int
	hook          func(write bool, n int)
}

func (d *hookDev) ReadAt(ctx context.Context, p []byte, off int64) error {
	err := d.Device.ReadAt(ctx, p, off)
	d.reads++
	d.hook(false, d.reads)
	return err
}

func (d *hookDev) WriteAt(ctx context.Context, p []byte, off int64) error {
	err := d.Device.WriteAt(ctx, p, off)
	d.writes++
	d.hook(true, d.writes)
	return err
}

// TestGuardConvert: a SH→EX convert cancelled before its first write
// (after its first read) writes nothing and the shared hold stays as it
// was; one cancelled after its first write is not cancelled and converts.
// An EX→SH convert writes first: cancelled before, it writes nothing and
// stays exclusive.
func TestGuardConvert(t *testing.T) {
	for _, after := range []bool{false, true} {
		c := newCluster(t, geo512, 1, 8)
		var g *handoverGuard
		var cancelled, armed bool
		var cd *countDev
		var hd *hookDev
		h := c.host(1, 1, func(_ int, d diskfmt.Device) diskfmt.Device {
			cd = &countDev{Device: d, base: c.off}
			hd = &hookDev{Device: cd, hook: func(write bool, n int) {
				if armed && n == 1 && write == after {
					cancelled = g.tryCancel()
				}
			}}
			return hd
		})
		r, err := h.Acquire(bg, AcquireRequest{Shared: true})
		require.NoError(t, err)
		sector := func() []byte {
			return append([]byte(nil), c.mems[0].Bytes()[c.off+hostOffset(1, 512):][:512]...)
		}
		before, ldBefore := sector(), c.leader(0)
		cd.take()
		hd.reads, hd.writes, armed = 0, 0, true
		var ctx context.Context
		ctx, g = guarded()
		err = r.Convert(ctx, ConvertRequest{Guard: g})
		ops := cd.take()
		if after {
			assert.False(t, cancelled, "a convert that has written is not cancelled")
			require.NoError(t, err)
			assert.False(t, r.Shared())
			continue
		}
		assert.True(t, cancelled)
		require.Error(t, err)
		assert.Zero(t, writes(ops), "%v", ops)
		assert.True(t, r.Shared(), "the shared hold stays")
		assert.Equal(t, before, sector(), "our dblock and mode block are untouched")
		assert.Equal(t, ldBefore, c.leader(0))

		// EX→SH, cancelled before it starts: its first I/O is a write.
		require.NoError(t, r.Convert(bg, ConvertRequest{}))
		before, ldBefore = sector(), c.leader(0)
		cd.take()
		ctx, g = guarded()
		require.True(t, g.tryCancel())
		require.Error(t, r.Convert(ctx, ConvertRequest{Shared: true, Guard: g}))
		assert.Empty(t, cd.take())
		assert.False(t, r.Shared(), "the exclusive hold stays")
		assert.Equal(t, before, sector())
		assert.Equal(t, ldBefore, c.leader(0))
	}
}
