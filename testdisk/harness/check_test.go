package harness

import (
	"strings"
	"testing"
)

// TestCheck shows that the checker finds each kind of violation and
// accepts clean histories.
func TestCheck(t *testing.T) {
	ex := func(host string, lver uint64, s, e int64) Holding {
		return Holding{Host: host, PID: 1, Mode: "ex", LVer: lver, Start: s, End: e}
	}
	sh := func(host string, s, e int64) Holding {
		return Holding{Host: host, PID: 2, Mode: "sh", Start: s, End: e}
	}
	cases := []struct {
		name string
		hs   []Holding
		want string // substring of the first violation; "" = none
	}{
		{"clean exclusive", []Holding{ex("a", 1, 0, 10), ex("b", 2, 11, 20), ex("a", 5, 21, 30)}, ""},
		{"clean shared", []Holding{sh("a", 0, 10), sh("b", 5, 15), ex("c", 3, 16, 20), sh("a", 21, 30)}, ""},
		{"exclusive overlap", []Holding{ex("a", 1, 0, 10), ex("b", 2, 10, 20)}, "overlap"},
		{"shared inside exclusive", []Holding{ex("a", 1, 0, 10), sh("b", 3, 4)}, "overlap"},
		{"exclusive inside shared", []Holding{sh("b", 0, 10), ex("a", 1, 3, 4)}, "overlap"},
		{"lver repeats", []Holding{ex("a", 4, 0, 10), ex("b", 4, 11, 20)}, "lver did not grow"},
		{"lver zero", []Holding{ex("a", 0, 0, 10)}, "lver 0"},
		{"backwards", []Holding{ex("a", 1, 10, 0)}, "ends before"},
	}
	for _, c := range cases {
		v := Check(c.hs)
		if c.want == "" && len(v) != 0 {
			t.Errorf("%s: unexpected violations %q", c.name, v)
		}
		if c.want != "" && (len(v) == 0 || !strings.Contains(v[0], c.want)) {
			t.Errorf("%s: violations %q, want %q", c.name, v, c.want)
		}
	}
	if n := SharedOverlaps([]Holding{sh("a", 0, 10), sh("b", 5, 15), sh("c", 16, 20)}); n != 1 {
		t.Errorf("SharedOverlaps = %d, want 1", n)
	}
	hs, err := ParseHoldings(strings.NewReader("x\nh a 12 ex 3 100 200\nh b 13 sh 0 201 300\ndone acquired=2\n"))
	if err != nil || len(hs) != 2 || hs[0] != (Holding{Host: "a", PID: 12, Mode: "ex", LVer: 3, Start: 100, End: 200}) || hs[1].PID != 13 {
		t.Errorf("ParseHoldings: %+v %v", hs, err)
	}
	if _, err := ParseHoldings(strings.NewReader("h a 12 xx 3 100 200\n")); err == nil {
		t.Error("ParseHoldings accepted a bad mode")
	}
}
