package delta

import (
	"context"
	"time"
)

// Clock is the local monotonic clock the delta algorithms read. It is the
// only source of time in this package; tests inject a clock that runs on
// testing/synctest's fake time.
//
// Now must never go backwards. Its whole seconds are sanlock's "monotime":
// the value written as a lease timestamp and used for every local
// measurement (docs/delta.md "Terms and clock"). Timestamps written by other hosts are
// never compared with it.
type Clock interface {
	// Now is the time since an arbitrary fixed origin (CLOCK_MONOTONIC's,
	// for the system clock). It should be well above zero: timestamp 0
	// means "free" on disk.
	Now() time.Duration
	// Sleep waits for d or until ctx is done, whichever comes first, and
	// returns ctx.Err() in the second case.
	Sleep(ctx context.Context, d time.Duration) error
}

// Monotime is the clock's reading in whole seconds, fraction dropped, as
// sanlock's monotime() gives it.
func Monotime(c Clock) uint64 {
	return uint64(c.Now() / time.Second)
}

// sleepFor sleeps d on c; a non-positive d only reports whether ctx is done.
func sleepFor(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	return c.Sleep(ctx, d)
}
