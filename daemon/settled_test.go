package daemon

import "testing"

// TestSettledAtSecondRenewal: Deps.Settled runs once per lockspace, at its
// second renewal, whatever the renewals' results.
func TestSettledAtSecondRenewal(t *testing.T) {
	calls := 0
	s := &Server{deps: Deps{Settled: func() { calls++ }}}
	a, b := s.renewalHook("a"), s.renewalHook("b")
	a(nil, 1, 1)
	if calls != 0 {
		t.Fatalf("Settled after one renewal")
	}
	a(nil, 1, 1)
	if calls != 1 {
		t.Fatalf("Settled called %d times after two renewals, want 1", calls)
	}
	for range 5 {
		a(nil, 1, 1)
	}
	b(nil, 1, 1)
	b(errTest, 0, 0)
	if calls != 2 {
		t.Fatalf("Settled called %d times for two lockspaces, want 2", calls)
	}
	// Without the hook nothing happens.
	(&Server{}).renewalHook("c")(nil, 1, 1)
}

type testErr struct{}

func (testErr) Error() string { return "test" }

var errTest error = testErr{}

// TestSettledAfterLeaseBurst: acquires and releases call Deps.Settled once
// per leaseBurst of them.
func TestSettledAfterLeaseBurst(t *testing.T) {
	calls := 0
	s := &Server{deps: Deps{Settled: func() { calls++ }}}
	for i := 0; i < leaseBurst-1; i++ {
		s.leaseWork()
	}
	if calls != 0 {
		t.Fatalf("Settled called %d times after %d lease commands", calls, leaseBurst-1)
	}
	s.leaseWork()
	for i := 0; i < leaseBurst; i++ {
		s.leaseWork()
	}
	if calls != 2 {
		t.Fatalf("Settled called %d times after %d lease commands, want 2", calls, 2*leaseBurst)
	}
	(&Server{}).leaseWork() // no Settled: nothing
}
