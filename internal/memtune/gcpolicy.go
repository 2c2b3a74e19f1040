package memtune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// The daemon's garbage collection target (docs/performance.md "Garbage
// collection target"). The runtime keeps the heap resident up to about its goal,
// live × (1 + GOGC/100): with the Go default (GOGC=100) that is twice the
// live data, and with 1000 held leases (about 1.5 KiB of live heap each)
// 8.4 KiB of RSS per lease. At GOGC=50 it is 1.5 times the live data (5.0
// KiB per lease). A small daemon keeps the default: its first collection
// waits until 4 MB have been allocated (4 MB × GOGC/100), and that first
// cycle alone adds about 1 MB of GC metadata to the RSS of an idle daemon.
// So the target follows the live heap, checked after each cycle: 50 once
// it exceeds gcPolicyLive, 100 below.
const (
	daemonGCPercent = 50
	defaultGCPct    = 100
	gcPolicyLive    = 4 << 20
)

// setGCPolicy starts following the live heap, unless GOGC is set in the
// environment, which keeps its usual meaning.
func setGCPolicy() {
	if _, ok := os.LookupEnv("GOGC"); ok {
		return
	}
	armGCPolicy(defaultGCPct)
}

// gcSentinel is garbage from birth: its finalizer runs after the next
// collection (it holds a pointer, so it is never a tiny allocation, whose
// finalizers may not run).
type gcSentinel struct {
	p *int
	_ [8]byte
}

// armGCPolicy sets the target for the live heap after the next
// collection; cur is the target in force.
func armGCPolicy(cur int) {
	runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) {
		want := defaultGCPct
		if liveHeap() > gcPolicyLive {
			want = daemonGCPercent
		}
		if want != cur {
			debug.SetGCPercent(want)
		}
		armGCPolicy(want)
	})
}

// liveHeap is the heap marked live by the last collection.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
