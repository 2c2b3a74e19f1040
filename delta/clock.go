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
