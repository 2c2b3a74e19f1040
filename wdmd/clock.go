package wdmd

import (
	"context"
	"time"

	"golang.org/x/sys/unix"
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

// SystemClock is the real Clock: one CLOCK_MONOTONIC reading at creation
// plus the monotonic time package time measures since then. Inside a
// testing/synctest bubble package time is fake, so the same clock runs on
// fake time there. This file is the only place in the package that reads
// package time's clock.
type SystemClock struct {
	base  time.Duration
	start time.Time
}

var _ Clock = (*SystemClock)(nil)

// NewSystemClock returns a clock that agrees with CLOCK_MONOTONIC.
func NewSystemClock() *SystemClock {
	var ts unix.Timespec
	base := time.Duration(0)
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err == nil {
		base = time.Duration(ts.Nano())
	}
	return NewClockAt(base)
}

// NewClockAt returns a clock whose Now starts at base; tests use it for
// reproducible times.
func NewClockAt(base time.Duration) *SystemClock {
	return &SystemClock{base: base, start: time.Now()}
}

// Now implements Clock.
func (c *SystemClock) Now() time.Duration { return c.base + time.Since(c.start) }

// After implements Clock.
func (c *SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Sleep implements Clock.
func (c *SystemClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// seconds is Now truncated to whole seconds, as wdmd and sanlock use it.
func seconds(c Clock) uint64 { return uint64(c.Now() / time.Second) }
