package memtune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// TestGCPolicyFollowsLiveHeap: above gcPolicyLive of live heap the target
// drops to daemonGCPercent, and back to the default once the heap is small.
func TestGCPolicyFollowsLiveHeap(t *testing.T) {
	old := debug.SetGCPercent(defaultGCPct)
	defer debug.SetGCPercent(old)
	armGCPolicy(defaultGCPct)
	gogc := func() int {
		s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(s)
		return int(s[0].Value.Uint64())
	}
	target := func(want int) {
		t.Helper()
		for i := 0; i < 50; i++ {
			runtime.GC()
			time.Sleep(10 * time.Millisecond) // the finalizer goroutine runs
			if gogc() == want {
				return
			}
		}
		t.Fatalf("GC percent never became %d (now %d, live %d)", want, gogc(), liveHeap())
	}
	big := make([]byte, 2*gcPolicyLive)
	target(daemonGCPercent)
	runtime.KeepAlive(big)
	big = nil
	target(defaultGCPct)
}
