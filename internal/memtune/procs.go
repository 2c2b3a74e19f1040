// The processor count (GOMAXPROCS) follows what the daemon is doing
// (docs/performance.md "One P while idle").
//
// An idle daemon's work is a few renewals a second, each a wake-up for a
// timer and one for each I/O completion. With more than one P, every such
// wake-up also wakes a second thread that spins looking for work, finds
// none and parks again: two to three thread switches for each one needed,
// and on a virtual machine a switch costs more than the renewal itself.
// One P has none of that, and one core is far more than an idle daemon
// uses. Client requests are another matter: two or more at once can use
// every core (ballot evaluation, decoding, the socket work). So the
// governor runs the process with one P while at most one request is in
// flight, raises it to the full count as soon as a second one starts, and
// lowers it again once no request has been in flight for procsIdleAfter.

package memtune

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// procsIdleAfter is how long the process stays at the full count after the
// last request ended.
const procsIdleAfter = 5 * time.Second

// governor switches GOMAXPROCS between 1 and max. A nil governor does
// nothing (GOMAXPROCS set in the environment, or one CPU).
type governor struct {
	max       int
	idleAfter time.Duration
	set       func(int) // runtime.GOMAXPROCS, replaced in tests

	inflight atomic.Int32
	high     atomic.Bool // the count is max (or being raised to it)
	mu       sync.Mutex  // serialises set and the timer
	timer    *time.Timer
}

// startGovernor returns a governor that has set GOMAXPROCS to 1, or nil
// when the count must not be managed: GOMAXPROCS is set in the environment
// (the user's choice stands) or the runtime has a single P anyway.
func startGovernor() *governor {
	if _, ok := os.LookupEnv("GOMAXPROCS"); ok {
		return nil
	}
	max := runtime.GOMAXPROCS(0)
	if max <= 1 {
		return nil
	}
	return newGovernor(max, procsIdleAfter, func(n int) { runtime.GOMAXPROCS(n) })
}

func newGovernor(max int, idleAfter time.Duration, set func(int)) *governor {
	g := &governor{max: max, idleAfter: idleAfter, set: set}
	g.set(1)
	return g
}

// Begin records a request starting; with another one in flight it raises
// the count to max.
func (g *governor) Begin() {
	if g == nil {
		return
	}
	if g.inflight.Add(1) >= 2 && !g.high.Load() {
		g.mu.Lock()
		if !g.high.Load() {
			g.high.Store(true)
			g.set(g.max)
		}
		g.mu.Unlock()
	}
}

// End records a request ending; when none is left in flight and the count
// is high, it arms the return to one P after idleAfter.
func (g *governor) End() {
	if g == nil {
		return
	}
	if g.inflight.Add(-1) != 0 || !g.high.Load() {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.timer == nil {
		g.timer = time.AfterFunc(g.idleAfter, g.lower)
	} else {
		g.timer.Reset(g.idleAfter)
	}
}

// lower returns to one P if no request is in flight.
func (g *governor) lower() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inflight.Load() == 0 && g.high.Load() {
		g.high.Store(false)
		g.set(1)
	}
}

// Procs is the count the governor last set (tests, status).
func (g *governor) Procs() int {
	if g == nil {
		return runtime.GOMAXPROCS(0)
	}
	if g.high.Load() {
		return g.max
	}
	return 1
}
