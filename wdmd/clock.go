package wdmd

import (
	"time"

	"github.com/gosanlock/gosanlock/clock"
)

// Clock is the monotonic clock wdmd reads. Now's whole seconds are the
// "now", "last_keepalive" and expiry values of the protocol, so the real
// clock must be CLOCK_MONOTONIC, like sanlock's: clock.NewSystem(), whose
// After also runs on fake time inside a testing/synctest bubble.
type Clock interface {
	// Now is the time since CLOCK_MONOTONIC's origin (or any fixed origin
	// well above zero in tests) and never goes backwards; Sleep waits for
	// d or until ctx is done and then returns ctx.Err().
	clock.Clock
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

var _ Clock = (*clock.System)(nil)

// seconds is Now truncated to whole seconds, as wdmd and sanlock use it.
func seconds(c Clock) uint64 { return clock.Monotime(c) }
