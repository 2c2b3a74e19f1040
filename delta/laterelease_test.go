package delta_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
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
