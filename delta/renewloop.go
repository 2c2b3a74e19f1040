package delta

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// loop is the renewal loop (docs/delta.md "Renewal loop"): a renewal
// every id_renewal_seconds + 0.5 s, and no sooner than 0.5 s after second
// L+id_renewal_seconds of the clock (L, the last success, counts whole
// seconds); after a failure retries come twice a second.
//
// The loop sleeps straight to each renewal: one wake-up per renewal. The
// renewals start on a grid of the clock, the multiples of renewGrid, and
// the next one is due a fixed time after the previous one was due, not
// after it ended: a lockspace's renewals do not drift by their own length,
// so lockspaces of one daemon that renew at one instant keep doing so,
// and share the wake-ups of the process. The first renewal after the join
// is delayed by the lockspace's phase of a second (renewPhase), so that
// lockspaces joined together fall into renewSlots groups instead of all
// renewing at once (each renewal needs a 1 MiB read buffer while it runs).
// A renewal comes within [L+every+0.5, L+every+1.5) seconds, as before
// the grid (docs/delta.md).
func (r *renewer) loop(ctx context.Context) {
	clk := r.ls.cfg.Clock
	phase := renewPhase(r.ls.cfg.Space, r.ls.cfg.HostID)
	var last time.Duration // when the last attempt was due to start (0: none yet)
	r.ls.leaveRenewal(r, false)
	for ctx.Err() == nil {
		// The interval follows the own io_timeout, which SetIOTimeout
		// may change at a renewal.
		every := time.Duration(r.ls.timing.IDRenewalSeconds()) * time.Second
		wait := 500 * time.Millisecond
		if now := clk.Now(); uint64(now/time.Second)-r.lastSuccess < uint64(every/time.Second) {
			at := time.Duration(r.lastSuccess)*time.Second + every + 500*time.Millisecond
			if last > 0 {
				at = max(at, last+every+500*time.Millisecond)
			} else {
				at += phase
			}
			at = onGrid(max(at, now))
			wait, last = at-now, at
		} else {
			at := onGrid(now + wait)
			wait, last = at-now, at
		}
		if clk.Sleep(ctx, wait) != nil {
			return
		}
		if !r.ls.enterRenewal(ctx) { // waits while a handover pauses us
			return
		}
		if r.ls.halted.Load() {
			r.ls.leaveRenewal(r, true)
			_ = clk.Sleep(ctx, 1<<62) // wait for the stop, renewing nothing
			return
		}
		r.renew(ctx)
		r.ls.leaveRenewal(r, true)
	}
}

// onGrid is the first instant at or after t that is a whole multiple of
// renewGrid on the clock.
func onGrid(t time.Duration) time.Duration {
	if off := t % renewGrid; off > 0 {
		t += renewGrid - off
	}
	return t
}

// renewSlots is how many phases a second holds (renewPhase), renewGrid
// the spacing of the instants renewals start at.
const (
	renewSlots = 4
	renewGrid  = time.Second / renewSlots
)

// renewPhase is the lockspace's phase of the second, one of renewSlots
// evenly spaced ones, picked by the lockspace name and host_id (FNV-1a):
// it differs between most lockspaces and needs no randomness. Few slots
// make lockspaces of one daemon share renewal instants (fewer wake-ups);
// more than one keeps the renewals, and the 1 MiB read buffer each needs
// while it runs, from coming all at once.
func renewPhase(space string, hostID uint64) time.Duration {
	h := uint64(14695981039346656037)
	for i := 0; i < len(space); i++ {
		h = (h ^ uint64(space[i])) * 1099511628211
	}
	for i := 0; i < 8; i++ {
		h = (h ^ (hostID >> (8 * i) & 0xff)) * 1099511628211
	}
	return time.Duration(h%renewSlots) * renewGrid
}

// renewUntilDone runs the renewal loop until the context ends, then
// releases the lease unless the lockspace was halted or its last renewal
// failed (a late abort releases with the record it names), and records
// the outcome in the status. Run and RunAdopted end with it. No release
// is started at or after LateReleaseDeadline of the last success, even
// when that renewal succeeded: its write may have taken most of its
// host_dead_seconds timeout, and by then another host may own our host_id.
func (ls *Lockspace) renewUntilDone(ctx context.Context, r *renewer) error {
	r.loop(ctx)

	var relErr error
	released := false
	switch abort := ls.lateAbort.Load(); {
	case ls.halted.Load():
	case r.prevOK && ls.now() >= LateReleaseDeadline(r.lastSuccess, ls.timing):
		ls.log().Info("delta_release skipped: last renewal too old", zap.Uint64("last_success", r.lastSuccess),
			zap.Uint64("now", ls.now()))
		relErr = ErrLateReleaseGivenUp
	case r.prevOK:
		relErr = ls.lease.Release(ctx, r.last)
		released = relErr == nil
	case abort != nil:
		relErr = r.releaseLate(*abort)
		released = relErr == nil
	}
	ls.mu.Lock()
	ls.status.Stopped, ls.status.Released = true, released
	ls.mu.Unlock()
	return relErr
}
