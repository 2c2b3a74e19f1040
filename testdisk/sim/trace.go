package sim

import (
	"fmt"
	"strconv"
	"time"
)

// trace records what happened, one line per event. Every line goes into a
// running FNV-1a hash (two runs of one seed must give the same hash); the
// last n lines are kept for failure reports, or all of them with keepAll.
type trace struct {
	n       int
	keepAll bool
	ring    []string
	next    int
	all     []string
	hash    uint64
	buf     []byte
}

func newTrace(n int, keepAll bool) *trace {
	return &trace{n: n, keepAll: keepAll, ring: make([]string, 0, n), hash: fnvOffset}
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func (t *trace) add(now time.Duration, who, format string, args ...any) {
	b := t.buf[:0]
	b = strconv.AppendInt(b, int64(now/time.Second), 10)
	b = append(b, '.')
	frac := int64(now % time.Second / time.Microsecond)
	b = append(b, fmt.Sprintf("%06d", frac)...)
	b = append(b, ' ')
	b = append(b, who...)
	b = append(b, ' ')
	b = fmt.Appendf(b, format, args...)
	t.buf = b
	h := t.hash
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime
	}
	h ^= '\n'
	h *= fnvPrime
	t.hash = h
	line := string(b)
	if t.keepAll {
		t.all = append(t.all, line)
	}
	if t.n <= 0 {
		return
	}
	if len(t.ring) < t.n {
		t.ring = append(t.ring, line)
		return
	}
	t.ring[t.next] = line
	t.next = (t.next + 1) % t.n
}

// lines returns the kept lines, oldest first.
func (t *trace) lines() []string {
	if t.keepAll {
		return t.all
	}
	out := append([]string(nil), t.ring[t.next:]...)
	return append(out, t.ring[:t.next]...)
}
