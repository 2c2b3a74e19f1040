package delta

import (
	"context"
	"time"
)

// loop is the renewal loop (docs/delta.md "Renewal loop"): 1-second
// checks while the last success L is younger than id_renewal_seconds,
// then 0.5 s and a renewal; after a failure the gap stays large, so
// retries come about twice a second.
//
// The checks are not slept one by one: monotime counts whole seconds, so
// the first check that finds the renewal due is the first at or after
// second L+every of the clock, and the loop sleeps straight to it (plus
// the 0.5 s): the same renewal times, one wake-up per renewal instead of
// one a second. Before the first renewal the checks are shifted once by a
// fraction of a second of the lockspace's own (renewPhase), so that
// lockspaces joined together do not renew all at once: each renewal needs
// a 1 MiB read buffer while it runs. The renewal still comes within
// [L+every+0.5, L+every+1.5) seconds, as with any phase of the checks.
func (r *renewer) loop(ctx context.Context) {
	clk := r.ls.cfg.Clock
	every := uint64(r.ls.timing.IDRenewalSeconds())
	shift := renewPhase(r.ls.cfg.Space, r.ls.cfg.HostID)
	r.ls.leaveRenewal(r, false)
	for ctx.Err() == nil {
		wait := 500 * time.Millisecond
		if now := clk.Now(); uint64(now/time.Second)-r.lastSuccess < every {
			check, due := now+shift, time.Duration(r.lastSuccess+every)*time.Second
			if check < due {
				check += (due - check + time.Second - 1) / time.Second * time.Second
			}
			wait += check - now
		}
		shift = 0
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

// renewPhase is a fixed fraction of a second, [0, 1 s) in milliseconds,
// derived from the lockspace name and host_id (FNV-1a): it differs between
// lockspaces and needs no randomness.
func renewPhase(space string, hostID uint64) time.Duration {
	h := uint64(14695981039346656037)
	for i := 0; i < len(space); i++ {
		h = (h ^ uint64(space[i])) * 1099511628211
	}
	for i := 0; i < 8; i++ {
		h = (h ^ (hostID >> (8 * i) & 0xff)) * 1099511628211
	}
	return time.Duration(h%1000) * time.Millisecond
}

// renewUntilDone runs the renewal loop until the context ends, then
// releases the lease unless the lockspace was halted or its last renewal
// failed (a late abort releases with the record it names), and records
// the outcome in the status. Run and RunResumed end with it.
func (ls *Lockspace) renewUntilDone(ctx context.Context, r *renewer) error {
	r.loop(ctx)

	var relErr error
	released := false
	switch abort := ls.lateAbort.Load(); {
	case ls.halted.Load():
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
