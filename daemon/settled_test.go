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
