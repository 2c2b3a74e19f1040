package delta

import (
	"context"
	"time"

	"github.com/gosanlock/gosanlock/clock"
)

// sleepFor sleeps d on c; a non-positive d only reports whether ctx is done.
func sleepFor(ctx context.Context, c clock.Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	return c.Sleep(ctx, d)
}

// Clock is clock.Clock.
//
// Deprecated: transitional alias, removed after the manager split.
type Clock = clock.Clock

// NewSystemClock returns clock.NewSystem().
//
// Deprecated: transitional alias, removed after the manager split.
func NewSystemClock() *clock.System { return clock.NewSystem() }

// Monotime returns clock.Monotime(c).
//
// Deprecated: transitional alias, removed after the manager split.
func Monotime(c clock.Clock) uint64 { return clock.Monotime(c) }
