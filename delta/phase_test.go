package delta

import (
	"fmt"
	"testing"
	"time"
)

// TestRenewPhaseSpread: lockspaces joined together get different phases
// (in [0, 1 s)), so their renewals, and the read buffers they need, do not
// all come at once.
func TestRenewPhaseSpread(t *testing.T) {
	buckets := map[time.Duration]bool{}
	for i := range 20 {
		p := renewPhase(fmt.Sprintf("LS%d", i), 1)
		if p < 0 || p >= time.Second {
			t.Fatalf("phase %v of LS%d outside [0, 1 s)", p, i)
		}
		buckets[p/(100*time.Millisecond)] = true
	}
	if len(buckets) < 7 {
		t.Fatalf("20 lockspaces fall into only %d of 10 tenths of a second", len(buckets))
	}
	if renewPhase("LS", 1) == renewPhase("LS", 2) && renewPhase("LS", 2) == renewPhase("LS", 3) {
		t.Fatal("the host_id does not change the phase")
	}
}
