package delta

import (
	"fmt"

	"github.com/gosanlock/gosanlock/rescode"
)

// HistoryEntry is one successful acquire or renewal (docs/delta.md "Renewal history"),
// with the count of failed renewals that followed it.
type HistoryEntry struct {
	Timestamp    uint64
	ReadMs       int64 // -1 if not measured
	WriteMs      int64
	NextTimeouts int // failed renewals after this one that timed out (-202)
	NextErrors   int // other failed renewals after this one
}

// String is the `sanlock client renewal` line for the entry.
func (e HistoryEntry) String() string {
	return fmt.Sprintf("timestamp=%d read_ms=%d write_ms=%d next_timeouts=%d next_errors=%d",
		e.Timestamp, e.ReadMs, e.WriteMs, e.NextTimeouts, e.NextErrors)
}

// History is the renewal history ring. It keeps sanlock's quirks: a reused
// slot keeps its two counters, and nothing is listed while prev and next
// are both 0 (so a ring of size 1 never lists anything).
type History struct {
	entries    []HistoryEntry
	next, prev int
}

// NewHistory returns a ring of size entries; size 0 disables the history.
func NewHistory(size int) *History {
	if size < 0 {
		size = 0
	}
	return &History{entries: make([]HistoryEntry, size)}
}

// Success records a successful acquire (0, 0 durations) or renewal.
func (h *History) Success(ts uint64, readMs, writeMs int64) {
	if len(h.entries) == 0 {
		return
	}
	e := &h.entries[h.next]
	e.Timestamp, e.ReadMs, e.WriteMs = ts, readMs, writeMs
	h.prev = h.next
	h.next = (h.next + 1) % len(h.entries)
}

// Failure counts a failed renewal against the last successful one.
func (h *History) Failure(result rescode.Code) {
	if len(h.entries) == 0 {
		return
	}
	if result == rescode.ErrAIOTimeout {
		h.entries[h.prev].NextTimeouts++
	} else {
		h.entries[h.prev].NextErrors++
	}
}

// Entries lists the ring oldest first.
func (h *History) Entries() []HistoryEntry {
	n := len(h.entries)
	if n == 0 || (h.prev == 0 && h.next == 0) {
		return nil
	}
	var out []HistoryEntry
	if h.entries[h.next].Timestamp != 0 {
		out = append(out, h.entries[h.next:]...)
	}
	return append(out, h.entries[:h.next]...)
}
