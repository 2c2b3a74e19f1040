package cli

import (
	"os"
	"runtime/debug"
)

// daemonGCPercent is the daemon's garbage collection target: a cycle starts
// once the heap has grown by half of what the previous cycle left live,
// instead of the Go default of all of it (GOGC=100). The daemon's live heap
// is small (a few MB, about 1.5 KiB per held lease), so cycles stay short,
// and the heap, which the runtime keeps resident up to about its goal, stays
// near 1.5× the live data instead of 2×: with 1000 held leases this is the
// difference between about 8.4 and 5.0 KiB of RSS per lease
// (docs/performance.md "Memory (session 5)").
const daemonGCPercent = 50

// setGCPolicy applies daemonGCPercent unless GOGC is set in the
// environment, which keeps its usual meaning.
func setGCPolicy() {
	if _, ok := os.LookupEnv("GOGC"); ok {
		return
	}
	debug.SetGCPercent(daemonGCPercent)
}
