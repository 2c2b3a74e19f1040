package daemon

import "testing"

// settleCount is a Tuning that counts the Settled calls.
type settleCount struct{ settled int }

func (*settleCount) RequestBegin() {}
func (*settleCount) RequestEnd()   {}
func (c *settleCount) Settled()    { c.settled++ }

// TestSettledAtSecondRenewal: Tuning.Settled runs once per lockspace, at its
// second renewal, whatever the renewals' results.
func TestSettledAtSecondRenewal(t *testing.T) {
	c := &settleCount{}
	s := &Server{deps: Deps{Tuning: c}}
	a, b := s.renewalHook("a"), s.renewalHook("b")
	a(nil, 1, 1)
	if c.settled != 0 {
		t.Fatalf("Settled after one renewal")
	}
	a(nil, 1, 1)
	if c.settled != 1 {
		t.Fatalf("Settled called %d times after two renewals, want 1", c.settled)
	}
	for range 5 {
		a(nil, 1, 1)
	}
	b(nil, 1, 1)
	b(errTest, 0, 0)
	if c.settled != 2 {
		t.Fatalf("Settled called %d times for two lockspaces, want 2", c.settled)
	}
	// Without the hook nothing happens.
	(&Server{}).renewalHook("c")(nil, 1, 1)
}

type testErr struct{}

func (testErr) Error() string { return "test" }

var errTest error = testErr{}

// TestSettledAfterLeaseBurst: acquires and releases call Tuning.Settled once
// per leaseBurst of them.
func TestSettledAfterLeaseBurst(t *testing.T) {
	c := &settleCount{}
	s := &Server{deps: Deps{Tuning: c}}
	for i := 0; i < leaseBurst-1; i++ {
		s.leaseWork()
	}
	if c.settled != 0 {
		t.Fatalf("Settled called %d times after %d lease commands", c.settled, leaseBurst-1)
	}
	s.leaseWork()
	for i := 0; i < leaseBurst; i++ {
		s.leaseWork()
	}
	if c.settled != 2 {
		t.Fatalf("Settled called %d times after %d lease commands, want 2", c.settled, 2*leaseBurst)
	}
	(&Server{}).leaseWork() // no Tuning: nothing
}
