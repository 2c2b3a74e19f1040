// Package clock is the monotonic clock every gosanlock algorithm reads:
// delta, paxos, wdmd and the lease manager see time only through the Clock
// interface, and tests inject a clock that runs on testing/synctest's fake
// time.
//
// Clock's whole seconds are sanlock's "monotime": the value written as a
// lease timestamp and used for every local measurement (docs/delta.md
// "Terms and clock"). Timestamps written by other hosts are never compared
// with it.
package clock

import (
	"context"
	"time"
)

// Clock is a local monotonic clock.
//
// Now must never go backwards.
type Clock interface {
	// Now is the time since an arbitrary fixed origin (CLOCK_MONOTONIC's,
	// for the system clock). It should be well above zero: timestamp 0
	// means "free" on disk.
	Now() time.Duration
	// Sleep waits for d or until ctx is done, whichever comes first, and
	// returns ctx.Err() in the second case.
	Sleep(ctx context.Context, d time.Duration) error
	// Wait is Sleep that also ends early, with woken true, as soon as a
	// value can be received from wake (Wait receives it). A caller sends
	// on wake without blocking (a channel of capacity 1), so a wake-up
	// that comes before the Wait makes it return at once. A nil wake
	// never ends it. The error is ctx's, never a wake-up's.
	Wait(ctx context.Context, d time.Duration, wake <-chan struct{}) (woken bool, err error)
}

// Wake sends a wake-up on w for a Clock.Wait without blocking: if one is
// pending already, that one will do.
func Wake(w chan<- struct{}) {
	select {
	case w <- struct{}{}:
	default:
	}
}

// Monotime is the clock's reading in whole seconds, fraction dropped, as
// sanlock's monotime() gives it.
func Monotime(c Clock) uint64 {
	return uint64(c.Now() / time.Second)
}
