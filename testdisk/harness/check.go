package harness

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Holding is one record of the holder program: a lease held by PID on
// Host in Mode ("ex" or "sh") with version LVer over the CLOCK_MONOTONIC
// interval [Start, End] (nanoseconds).
type Holding struct {
	Host       string
	PID        int
	Mode       string
	LVer       uint64
	Start, End int64
}

func (h Holding) String() string {
	return fmt.Sprintf("%s/%d %s lver %d [%d, %d]", h.Host, h.PID, h.Mode, h.LVer, h.Start, h.End)
}

// ParseHoldings reads holder records ("h HOST PID MODE LVER START END").
// Other lines are ignored; a malformed record is an error.
func ParseHoldings(r io.Reader) ([]Holding, error) {
	var out []Holding
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "h" {
			continue
		}
		if len(f) != 7 {
			return out, fmt.Errorf("bad record %q", sc.Text())
		}
		pid, e1 := strconv.Atoi(f[2])
		lver, e2 := strconv.ParseUint(f[4], 10, 64)
		start, e3 := strconv.ParseInt(f[5], 10, 64)
		end, e4 := strconv.ParseInt(f[6], 10, 64)
		if e1 != nil || e2 != nil || e3 != nil || e4 != nil || (f[3] != "ex" && f[3] != "sh") {
			return out, fmt.Errorf("bad record %q", sc.Text())
		}
		out = append(out, Holding{Host: f[1], PID: pid, Mode: f[3], LVer: lver, Start: start, End: end})
	}
	return out, sc.Err()
}

// ReadHoldings reads and concatenates the records of several files.
func ReadHoldings(paths ...string) ([]Holding, error) {
	var all []Holding
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		hs, err := ParseHoldings(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		all = append(all, hs...)
	}
	return all, nil
}

// Check returns every safety violation among the holdings of one resource:
//   - two exclusive holdings overlap;
//   - a shared and an exclusive holding overlap;
//   - an exclusive holding does not have a larger lver than every exclusive
//     holding that started before it (lver grows with every exclusive
//     acquisition), or has lver 0;
//   - a holding ends before it starts.
//
// Intervals that touch (one's End equals the other's Start) count as
// overlapping: on one machine's monotonic clock the release of one holder
// is sent strictly before the next acquire returns.
func Check(hs []Holding) []string {
	var v []string
	sorted := append([]Holding(nil), hs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Start < sorted[j].Start })
	// Sweep by start time, keeping the holdings still open at that time;
	// only the one with the latest end of each mode matters for overlap
	// with later holdings, but all are reported.
	var open []Holding
	var lastEx *Holding
	for i := range sorted {
		h := sorted[i]
		if h.End < h.Start {
			v = append(v, fmt.Sprintf("holding ends before it starts: %v", h))
		}
		keep := open[:0]
		for _, o := range open {
			if o.End >= h.Start {
				keep = append(keep, o)
			}
		}
		open = keep
		for _, o := range open {
			if h.Mode == "ex" || o.Mode == "ex" {
				v = append(v, fmt.Sprintf("overlap: %v and %v", o, h))
			}
		}
		open = append(open, h)
		if h.Mode == "ex" {
			if h.LVer == 0 {
				v = append(v, fmt.Sprintf("exclusive holding with lver 0: %v", h))
			}
			if lastEx != nil && h.LVer <= lastEx.LVer {
				v = append(v, fmt.Sprintf("lver did not grow: %v after %v", h, *lastEx))
			}
			lastEx = &sorted[i]
		}
	}
	return v
}

// SharedOverlaps counts the pairs of shared holdings that overlap in time
// (proof that a shared-mode run really had concurrent holders).
func SharedOverlaps(hs []Holding) int {
	var sh []Holding
	for _, h := range hs {
		if h.Mode == "sh" {
			sh = append(sh, h)
		}
	}
	sort.Slice(sh, func(i, j int) bool { return sh[i].Start < sh[j].Start })
	n := 0
	for i := range sh {
		for j := i + 1; j < len(sh) && sh[j].Start <= sh[i].End; j++ {
			n++
		}
	}
	return n
}

// Summary counts holdings by host and mode.
func Summary(hs []Holding) string {
	n := map[string]int{}
	var keys []string
	for _, h := range hs {
		k := h.Host + "/" + h.Mode
		if n[k] == 0 {
			keys = append(keys, k)
		}
		n[k]++
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, n[k]))
	}
	return fmt.Sprintf("%d holdings (%s)", len(hs), strings.Join(parts, " "))
}
