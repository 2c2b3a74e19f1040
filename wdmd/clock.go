package wdmd

import (
	"context"
	"time"

	"github.com/gosanlock/gosanlock/delta"
)

// Clock is the monotonic clock wdmd reads. Now's whole seconds are the
// "now", "last_keepalive" and expiry values of the protocol, so the real
// clock must be CLOCK_MONOTONIC, like sanlock's.
type Clock interface {
	// Now is the time since CLOCK_MONOTONIC's origin (or any fixed origin
	// well above zero in tests). It never goes backwards.
	Now() time.Duration
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
	// Sleep waits for d or until ctx is done and then returns ctx.Err().
	Sleep(ctx context.Context, d time.Duration) error
}

// SystemClock is the real Clock: delta's (one CLOCK_MONOTONIC reading at
// creation plus the monotonic time package time measures since then, so
// it also runs on fake time inside a testing/synctest bubble) with After.
// This file is the only place in the package that reads package time's
// clock.
type SystemClock struct{ *delta.SystemClock }

var _ Clock = (*SystemClock)(nil)

// NewSystemClock returns a clock that agrees with CLOCK_MONOTONIC.
func NewSystemClock() *SystemClock { return &SystemClock{delta.NewSystemClock()} }

// NewClockAt returns a clock whose Now starts at base; tests use it for
// reproducible times.
func NewClockAt(base time.Duration) *SystemClock { return &SystemClock{delta.NewClockAt(base)} }

// After implements Clock.
func (c *SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// seconds is Now truncated to whole seconds, as wdmd and sanlock use it.
func seconds(c Clock) uint64 { return uint64(c.Now() / time.Second) }
