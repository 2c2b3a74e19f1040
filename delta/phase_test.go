package delta

import (
	"fmt"
	"testing"
	"time"
)

// TestRenewPhaseSpread: lockspaces joined together get phases spread over
// the renewSlots slots of a second, so their renewals, and the read
// buffers they need, do not all come at once.
func TestRenewPhaseSpread(t *testing.T) {
	slots := map[time.Duration]int{}
	for i := range 20 {
		p := renewPhase(fmt.Sprintf("LS%d", i), 1)
		if p < 0 || p >= time.Second || p%(time.Second/renewSlots) != 0 {
			t.Fatalf("phase %v of LS%d is not one of the %d slots of a second", p, i, renewSlots)
		}
		slots[p]++
	}
	if len(slots) != renewSlots {
		t.Fatalf("20 lockspaces fall into only %d of %d slots: %v", len(slots), renewSlots, slots)
	}
	for p, n := range slots {
		if n > 10 {
			t.Fatalf("%d of 20 lockspaces share phase %v", n, p)
		}
	}
	differs := false
	for id := uint64(2); id < 10; id++ {
		differs = differs || renewPhase("LS", id) != renewPhase("LS", 1)
	}
	if !differs {
		t.Fatal("the host_id does not change the phase")
	}
}

// TestOnGrid: renewals start on the multiples of renewGrid.
func TestOnGrid(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct{ t, want time.Duration }{
		{0, 0},
		{1 * ms, 250 * ms},
		{250 * ms, 250 * ms},
		{3001 * ms, 3250 * ms},
		{3749 * ms, 3750 * ms},
	} {
		if got := onGrid(c.t); got != c.want {
			t.Errorf("onGrid(%v) = %v, want %v", c.t, got, c.want)
		}
	}
}
