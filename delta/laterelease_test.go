package delta_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/testdisk"
)

// failAndStop joins as host 1 (io 1), makes every I/O fail, waits until
// the renewals have failed for a while, then stops the lockspace after
// ReleaseWhenBack (late) or not.
func failAndStop(t *testing.T, late bool, restoreAfter time.Duration, foreign bool) (*host, diskfmt.Leader) {
	m := newLockspaceDisk(t, geo512, 1)
	h := startHost(t, t.Context(), m, hostOpts{hostID: 1, name: "hostA", io: 1})
	require.Equal(t, rescode.OK, waitJoined(h))
	time.Sleep(3 * time.Second)
	h.dev.crash()
	time.Sleep(10 * time.Second) // past the fail deadline L+8
	if late {
		h.ls.ReleaseWhenBack(t.Context())
	}
	h.cancel()
	if foreign {
		// Another host took our host_id meanwhile: a new owner generation.
		ld, _ := leaseOnDisk(t, m, geo512, 1)
		ld.OwnerGeneration++
		ld.Checksum = ld.ComputeChecksum()
		b := make([]byte, 512)
		ld.Encode(b)
		require.NoError(t, m.WriteAt(t.Context(), b, 0))
	}
	time.Sleep(restoreAfter)
	h.dev.failReads.Store(false)
	h.dev.failWrites.Store(false)
	<-h.exited
	ld, _ := leaseOnDisk(t, m, geo512, 1)
	return h, ld
}

// Without ReleaseWhenBack a lockspace that stops after failed renewals
// leaves its lease alone (docs/delta.md "Removing a lockspace").
func TestNoLateReleaseByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ld := failAndStop(t, false, 5*time.Second, false)
		assert.NotZero(t, ld.Timestamp)
		assert.False(t, h.ls.Status().Released)
	})
}

// With ReleaseWhenBack the release is written once the storage answers,
// within the retry backoff (1, 2, 4 s ...).
func TestLateReleaseWhenStorageReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		h, ld := failAndStop(t, true, 5*time.Second, false)
		assert.Zero(t, ld.Timestamp, "release record written")
		assert.True(t, h.ls.Status().Released)
		assert.NoError(t, h.runErr)
		// Joined at ~3 s, stopped at ~16 s, storage back at ~21 s;
		// attempts 0, 1, 3, 7 s after the stop: released at ~23 s.
		assert.Less(t, time.Since(start), 27*time.Second)
	})
}

// Past last_success + host_dead_seconds - 2*io_timeout the release is
// given up: another host may own our host_id by then.
func TestLateReleaseGivenUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ld := failAndStop(t, true, 80*time.Second, false)
		assert.NotZero(t, ld.Timestamp, "nothing written after the give-up")
		assert.ErrorIs(t, h.runErr, delta.ErrLateReleaseGivenUp)
		last := h.ls.Status().RenewalLastSuccess
		assert.Equal(t, last+68-2, delta.LateReleaseDeadline(last, h.ls.Timing()))
	})
}

// A lease that is no longer ours (new owner generation) is never written.
func TestLateReleaseNotOurs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ld := failAndStop(t, true, 3*time.Second, true)
		assert.NotZero(t, ld.Timestamp)
		assert.False(t, h.ls.Status().Released)
		assert.Equal(t, rescode.ErrRenewOwner, rescode.CodeOf(h.runErr))
	})
}

// stallDev holds reads (stallReads) or writes (stallWrites) until the
// gate is closed, whatever their context: a device whose submission waits
// for it (no asynchronous direct I/O), so that the I/O's timeout cannot
// end the wait, and whose answer is then taken as it is.
type stallDev struct {
	*testdisk.Mem
	gate                    chan struct{}
	stallReads, stallWrites atomic.Bool
	writes                  atomic.Int64
}

func (d *stallDev) ReadAt(ctx context.Context, p []byte, off int64) error {
	if d.stallReads.Load() {
		<-d.gate
	}
	return d.Mem.ReadAt(context.WithoutCancel(ctx), p, off)
}

func (d *stallDev) WriteAt(ctx context.Context, p []byte, off int64) error {
	d.writes.Add(1)
	if d.stallWrites.Load() {
		<-d.gate
	}
	return d.Mem.WriteAt(context.WithoutCancel(ctx), p, off)
}

// A renewal read answered after its io_timeout fails as a timeout and no
// renewal is written: what it read no longer allows a write.
func TestRenewReadAnsweredLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newLockspaceDisk(t, geo512, 1)
		clk := clock.NewAt(500 * time.Second)
		l := delta.Lease{Dev: m, Geometry: geo512, Space: space, HostID: 1, Timing: delta.NewTiming(1, 0), Clock: clk}
		acq, err := l.Acquire(t.Context(), "hostA")
		require.NoError(t, err)
		d := &stallDev{Mem: m, gate: make(chan struct{})}
		d.stallReads.Store(true)
		l.Dev = d
		time.AfterFunc(60*time.Second, func() { close(d.gate) })
		_, err = l.Renew(t.Context(), delta.RenewInput{Last: acq.Leader, PrevOK: true})
		assert.Equal(t, rescode.ErrAIOTimeout, rescode.CodeOf(err), "%v", err)
		assert.Zero(t, d.writes.Load(), "no renewal written")
		ld, _ := leaseOnDisk(t, m, geo512, 1)
		assert.Equal(t, acq.Leader.Timestamp, ld.Timestamp)
	})
}

// A renewal whose write was answered only after LateReleaseDeadline of
// its own timestamp (inside its host_dead_seconds timeout) counts as a
// success, but the release at stop is not written: by then another host
// may own our host_id.
func TestNoReleaseAfterSlowRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newLockspaceDisk(t, geo512, 1)
		d := &stallDev{Mem: m, gate: make(chan struct{})}
		ls, err := delta.New(delta.Config{Dev: d, Space: space, HostID: 1, HostName: "hostA", IOTimeout: 1,
			Clock: clock.NewAt(500 * time.Second), Log: zaptest.NewLogger(t)})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		runErr := make(chan error, 1)
		go func() { runErr <- ls.Run(ctx) }()
		<-ls.Joined()
		require.Equal(t, rescode.OK, ls.Status().AcquireLastResult)
		d.stallWrites.Store(true)
		// The next renewal's write waits 67 s (its timeout is 68 s).
		time.Sleep(3 * time.Second)
		begin := ls.Status().RenewalLastSuccess
		time.Sleep(67 * time.Second)
		close(d.gate)
		synctest.Wait()
		last := ls.Status().RenewalLastSuccess
		require.Greater(t, last, begin, "the slow renewal succeeded")
		cancel()
		assert.ErrorIs(t, <-runErr, delta.ErrLateReleaseGivenUp)
		ld, _ := leaseOnDisk(t, m, geo512, 1)
		assert.Equal(t, last, ld.Timestamp, "no release written")
		assert.False(t, ls.Status().Released)
	})
}
