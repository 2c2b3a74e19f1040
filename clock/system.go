package clock

import (
	"context"
	"time"

	"golang.org/x/sys/unix"
)

// System is the real Clock. Its Now follows CLOCK_MONOTONIC: it takes one
// reading of CLOCK_MONOTONIC when created and adds the monotonic time
// elapsed since then as package time measures it. Because the elapsed part
// comes from package time, the same clock also runs on fake time inside a
// testing/synctest bubble.
//
// This file is the only place in gosanlock's algorithm packages that reads
// package time's clock.
type System struct {
	base  time.Duration // clock reading at start
	start time.Time     // carries Go's monotonic reading
}

var _ Clock = (*System)(nil)

// NewSystem returns a clock that starts at the current CLOCK_MONOTONIC
// value, so timestamps on disk agree with sanlock's log and status output.
func NewSystem() *System {
	var ts unix.Timespec
	base := time.Duration(0)
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err == nil {
		base = time.Duration(ts.Nano())
	}
	return NewAt(base)
}

// NewAt returns a clock whose Now starts at base and then advances with
// package time's monotonic clock (or synctest's fake clock). Tests use it
// for reproducible timestamps; base should be at least a few seconds so no
// lease is ever written with timestamp 0.
func NewAt(base time.Duration) *System {
	return &System{base: base, start: time.Now()}
}

// Now implements Clock.
func (c *System) Now() time.Duration { return c.base + time.Since(c.start) }

// Sleep implements Clock.
func (c *System) Sleep(ctx context.Context, d time.Duration) error {
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

// Wait implements Clock.
func (c *System) Wait(ctx context.Context, d time.Duration, wake <-chan struct{}) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	select {
	case <-wake:
		return true, nil
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return false, nil
	case <-wake:
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// After returns a channel that receives once d has passed (wdmd's timer).
func (c *System) After(d time.Duration) <-chan time.Time { return time.After(d) }
