package delta

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

// HostState is what we think of another host of the lockspace (spec:
// docs/delta.md "Host states"); the values are the get_hosts flags.
type HostState uint32

// Host states.
const (
	HostUnknown HostState = 1
	HostFree    HostState = 2
	HostLive    HostState = 3
	HostFail    HostState = 4
	HostDead    HostState = 5
)

func (s HostState) String() string {
	switch s {
	case HostUnknown:
		return "UNKNOWN"
	case HostFree:
		return "FREE"
	case HostLive:
		return "LIVE"
	case HostFail:
		return "FAIL"
	case HostDead:
		return "DEAD"
	}
	return "ERROR"
}

// HostStatus is one entry of the host status table (docs/delta.md "Host table").
// All times are our monotime in whole seconds; OwnerID, OwnerGeneration,
// Timestamp, IOTimeout and OwnerName are copied from the host's lease.
type HostStatus struct {
	HostID          uint64
	LastCheck       uint64 // latest processing
	LastLive        uint64 // when we last saw its owner/generation/timestamp change
	LastReq         uint64 // when we last accepted a request notification from it
	OwnerID         uint64
	OwnerGeneration uint64
	Timestamp       uint64 // the host's own clock: only compared for change
	IOTimeout       uint16
	OwnerName       string
	LeaseBad        int    // consecutive reads with wrong magic or lockspace name
	Flags           uint32 // the lease's leader flags (NO_TIMEOUT, DEAD_EXT: docs/delta.md "NO_TIMEOUT and DEAD_EXT")
	// FoundDeadExtGen is the generation of a DEAD_EXT mark found on disk
	// that we did not write; WroteDeadExtGen the generation of the mark
	// our set_host wrote (0: none). Shown by host_status as 5.1.1 does.
	FoundDeadExtGen uint64
	WroteDeadExtGen uint64
}

// NoTimeout and DeadExt report the lease's 5.x leader flags.
func (h *HostStatus) NoTimeout() bool { return h.Flags&diskfmt.LeaderNoTimeout != 0 }
func (h *HostStatus) DeadExt() bool   { return h.Flags&diskfmt.LeaderDeadExt != 0 }

// HostInfo is a get_hosts entry.
type HostInfo struct {
	HostID     uint64
	Generation uint64
	Timestamp  uint64
	IOTimeout  uint32
	State      HostState
	DeadExt    bool // the lease is marked DEAD_EXT (get_hosts flag 0x10)
}

// HostFlagDeadExt is the get_hosts flag (beside the state) of a host whose
// lease is marked DEAD_EXT, as 5.1.1 reports it.
const HostFlagDeadExt = 0x10

// Flags is the get_hosts flags word: the state and HostFlagDeadExt.
func (h HostInfo) Flags() uint32 {
	f := uint32(h.State)
	if h.DeadExt {
		f |= HostFlagDeadExt
	}
	return f
}

// ReceivedEvent is a host event addressed to us, found in another host's
// lease (docs/delta.md "Receiving events").
type ReceivedEvent struct {
	Event          HostEvent // HostID is our own host_id
	FromHostID     uint64
	FromGeneration uint64
}

// ProcessResult is what one pass over a renewal read found.
type ProcessResult struct {
	// Events addressed to us, in host_id order. There is no
	// de-duplication: an event is reported for every changed lease of its
	// sender while our bit is set.
	Events []ReceivedEvent
	// Requests lists the hosts whose request notification was accepted
	// (rate limited to one per set_bitmap_seconds per host); the resource
	// side should then examine the resources it holds.
	Requests []uint64
	// Log holds lines worth logging (host changes, bad leases).
	Log []string
}

// HostTable watches the other hosts of a lockspace through our renewal
// reads. It never compares another host's timestamp with our clock: it
// notes, on our clock, when it last saw each lease change, and judges
// liveness by how long ago that was.
//
// A read is taken in two steps so that the caller need not keep the whole
// area until it processes it: Stage compares the read with the table and
// keeps only the records that would change something (in an idle
// lockspace, the few hosts that renewed), and Apply then updates the table
// with them at the processing time. Process does both at once.
type HostTable struct {
	maxHosts   int
	firstCheck uint64
	// hosts holds the entries of host_ids 1..len(hosts), index host_id-1;
	// it grows only as far as the highest host_id whose entry became
	// non-zero. Every entry beyond it is zero but for HostID and
	// LastCheck (lastCheck if the last read covered it): in an idle
	// lockspace of 2000 host_ids, few of them ever used, the table is a
	// few entries instead of 2000.
	hosts     []HostStatus
	lastCheck uint64 // time of the last Apply
	checked   int    // records the last Apply covered

	// The latest staged read, not applied yet.
	staged  bool
	count   int            // records the read covered (host_ids 1..count)
	changed []stagedRecord // in host_id order; its array is reused
	ourID   uint64
	touch   byte // touchRecords' result, kept so its loads are not dropped
	noTouch bool // Stage skips touchRecords (benchmarks compare)
	// sums[i] is the checksum field of host_id i+1's record the last time
	// Stage found the record as the table holds it (0: not known). A
	// record read with that checksum and the timestamp the table holds is
	// left out on one cache line (see Stage).
	sums []uint32
}

// stagedRecord is one record of a staged read that differs from the table.
type stagedRecord struct {
	index  int // host_id-1
	rec    diskfmt.Leader
	ourBit bool // our bit is set in the host's bitmap
}

// NewHostTable returns an empty table for host_ids 1..maxHosts.
func NewHostTable(maxHosts int) *HostTable {
	return &HostTable{maxHosts: maxHosts}
}

// entry returns host_id i+1's entry as stored or, beyond the stored ones,
// as it reads (zero).
func (t *HostTable) entry(i int) HostStatus {
	if i < len(t.hosts) {
		return t.hosts[i]
	}
	h := HostStatus{HostID: uint64(i + 1)}
	if i < t.checked {
		h.LastCheck = t.lastCheck
	}
	return h
}

// stored returns a pointer to host_id i+1's stored entry, growing the
// table up to it.
func (t *HostTable) stored(i int) *HostStatus {
	for len(t.hosts) <= i {
		t.hosts = append(t.hosts, t.entry(len(t.hosts)))
	}
	return &t.hosts[i]
}

// Ready reports whether at least one read has been processed.
func (t *HostTable) Ready() bool { return t.firstCheck != 0 }

// FirstCheck is our monotime of the first processing (0 before).
func (t *HostTable) FirstCheck() uint64 { return t.firstCheck }

// Process updates the table from one whole-area read (docs/delta.md "Watching other hosts")
// at our time now. ourID is our host_id; setBitmapSeconds limits how often
// a host's request notification is accepted.
func (t *HostTable) Process(now uint64, area []byte, g diskfmt.Geometry, space string, ourID uint64, setBitmapSeconds int) ProcessResult {
	t.Stage(area, g, space, ourID)
	return t.Apply(now, space, setBitmapSeconds)
}

// Stage takes a whole-area read for the next Apply, replacing any read
// staged before and not applied (only the newest read counts). It keeps
// nothing of area.
//
// A record is left out only when Apply would do nothing with it but note
// the check time: a good lease (magic and lockspace name) whose owner,
// generation, timestamp and host name are what the table holds, of a host
// whose last lease was good. Apply reads nothing else of such a record.
//
// Most records of a lockspace do not change from one read to the next (the
// host_ids nobody uses, hosts that left), and the area comes straight from
// the disk, so comparing a record costs its cache misses, not its
// instructions. A record is therefore first checked on the one 64-byte
// line that holds its timestamp and checksum: the same timestamp and the
// checksum field the record had the last time it was found as the table
// holds it (sums) means the same record, without loading the lines of its
// owner and names. The checksum covers every field the full comparison
// reads; a record that changed but kept its timestamp and the 32-bit
// checksum of its earlier content (a collision, or bytes damaged in place
// without its checksum field) would be taken as unchanged. That can only
// leave a host's name, generation or bad-lease count stale in the table
// until its timestamp next changes: liveness is read from timestamps, which are
// always compared, and the owner of a lease is always checked on disk
// (docs/paxos.md "Owner liveness"). docs/performance.md "Host table
// staging" has the figures.
func (t *HostTable) Stage(area []byte, g diskfmt.Geometry, space string, ourID uint64) {
	ss := g.SectorSize
	t.staged, t.ourID = true, ourID
	t.changed = t.changed[:0]
	t.count = 0
	if ss <= 0 {
		return
	}
	n := min(t.maxHosts, len(area)/ss)
	t.count = n
	le := binary.LittleEndian
	space = normName(space)
	var zero HostStatus
	if !t.noTouch {
		t.touch = touchRecords(area[:n*ss], ss)
	}
	if len(t.sums) < n {
		t.sums = append(t.sums, make([]uint32, n-len(t.sums))...)
	}
	sums := t.sums[:n]
	for i := 0; i < n; i++ {
		raw := area[i*ss : (i+1)*ss]
		h := &zero
		if i < len(t.hosts) {
			h = &t.hosts[i]
		}
		sum := le.Uint32(raw[diskfmt.LeaderChecksumLen:])
		ts := le.Uint64(raw[152:])
		if sum != 0 && sum == sums[i] && ts == h.Timestamp {
			continue
		}
		if h.LeaseBad == 0 && le.Uint32(raw[0:]) == diskfmt.DeltaMagic &&
			ts == h.Timestamp && le.Uint64(raw[32:]) == h.OwnerID && le.Uint32(raw[8:]) == h.Flags &&
			le.Uint64(raw[40:]) == h.OwnerGeneration &&
			nameIs(raw[56:104], space) && nameIs(raw[104:152], h.OwnerName) {
			sums[i] = sum
			continue
		}
		sums[i] = 0
		rec, _ := diskfmt.DecodeLeader(raw)
		t.changed = append(t.changed, stagedRecord{index: i, rec: rec, ourBit: diskfmt.BitmapTest(raw, ourID)})
	}
}

// touchRecords loads the 64-byte line of every sector of area that holds
// the record's timestamp and checksum (bytes 128–191), the line Stage's
// first check reads. The area was just written by the disk, so none of it
// is in the CPU's caches: in this loop the loads do not depend on one
// another or on a branch, so the processor has many of them in flight at
// once, where the comparing loop waits for each record's line in turn. The
// result only keeps the loads from being dropped.
func touchRecords(area []byte, ss int) byte {
	var x byte
	for o := 0; o+192 <= len(area); o += ss {
		x ^= area[o+128]
	}
	return x
}

// nameIs reports whether a stored 48-byte name field reads as s (as
// diskfmt.NameEqual does), for an s already cut at its first NUL and to at
// most NameLen bytes: no scan of the field is needed.
func nameIs(field []byte, s string) bool {
	n := len(s)
	return n <= len(field) && string(field[:n]) == s && (n == len(field) || field[n] == 0)
}

// normName cuts s as diskfmt.NameEqual does before comparing.
func normName(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	if len(s) > diskfmt.NameLen {
		s = s[:diskfmt.NameLen]
	}
	return s
}

// Apply updates the table from the staged read at our time now and
// returns what it found; with nothing staged it does nothing.
func (t *HostTable) Apply(now uint64, space string, setBitmapSeconds int) ProcessResult {
	var res ProcessResult
	if !t.staged {
		return res
	}
	t.staged = false
	if t.firstCheck == 0 {
		t.firstCheck = now
	}
	t.lastCheck, t.checked = now, t.count
	for i := 0; i < min(t.count, len(t.hosts)); i++ {
		t.hosts[i].LastCheck = now
	}
	ourID := t.ourID
	for k := range t.changed {
		s := &t.changed[k]
		i := s.index + 1
		rec := &s.rec
		h := t.stored(s.index)
		good := rec.Magic == diskfmt.DeltaMagic && diskfmt.NameEqual(rec.SpaceName[:], space)
		if !good {
			h.LeaseBad++
			if h.LeaseBad <= 0 { // keep it non-zero if it ever wraps
				h.LeaseBad = 1
			}
			if h.LeaseBad == 1 || h.LeaseBad%100 == 0 {
				res.Log = append(res.Log, fmt.Sprintf("check_other_lease invalid for host %d %d ts %d name %s in %s",
					i, rec.OwnerGeneration, rec.Timestamp, diskfmt.NameString(rec.ResourceName[:]), space))
			}
		} else if h.LeaseBad != 0 {
			res.Log = append(res.Log, fmt.Sprintf("check_other_lease corrected for host %d %d ts %d name %s in %s",
				i, rec.OwnerGeneration, rec.Timestamp, diskfmt.NameString(rec.ResourceName[:]), space))
			h.LeaseBad = 0
		}
		if good && (!diskfmt.NameEqual(rec.ResourceName[:], h.OwnerName) || rec.OwnerGeneration != h.OwnerGeneration) {
			name := diskfmt.NameString(rec.ResourceName[:])
			res.Log = append(res.Log, fmt.Sprintf("host %d %d %d %s", i, rec.OwnerGeneration, rec.Timestamp, name))
			h.OwnerName = name
		}
		if good && rec.Flags != h.Flags {
			if rec.DeadExt() && !h.DeadExt() {
				res.Log = append(res.Log, fmt.Sprintf("host %d %d %d is dead (ext)", i, rec.OwnerGeneration, rec.Timestamp))
				if h.WroteDeadExtGen != rec.OwnerGeneration {
					h.FoundDeadExtGen = rec.OwnerGeneration
				}
			}
			h.Flags = rec.Flags
		}
		if rec.OwnerID == h.OwnerID && rec.OwnerGeneration == h.OwnerGeneration && rec.Timestamp == h.Timestamp {
			continue
		}
		if good {
			h.OwnerID, h.OwnerGeneration, h.IOTimeout = rec.OwnerID, rec.OwnerGeneration, rec.IOTimeout // OwnerName: set above
		}
		h.Timestamp = rec.Timestamp
		h.LastLive = now
		if uint64(i) == ourID || !s.ourBit {
			continue
		}
		if rec.WriteGeneration != 0 {
			res.Events = append(res.Events, ReceivedEvent{
				Event:          HostEvent{HostID: ourID, Generation: rec.WriteID, Event: rec.WriteGeneration, Data: rec.WriteTimestamp},
				FromHostID:     h.OwnerID,
				FromGeneration: h.OwnerGeneration,
			})
			res.Log = append(res.Log, fmt.Sprintf("host event from host_id %d", i))
		}
		if h.LastReq != 0 && now-h.LastReq < uint64(setBitmapSeconds) {
			continue
		}
		h.LastReq = now
		res.Requests = append(res.Requests, uint64(i))
		res.Log = append(res.Log, fmt.Sprintf("request from host_id %d", i))
	}
	if cap(t.changed) > 64 && len(t.changed) < cap(t.changed)/4 {
		t.changed = nil // a burst of changes (a join, a bad read) is over
	}
	t.changed = t.changed[:0]
	return res
}

// Host returns the entry for hostID (false if out of range).
func (t *HostTable) Host(hostID uint64) (HostStatus, bool) {
	if hostID == 0 || hostID > uint64(t.maxHosts) {
		return HostStatus{}, false
	}
	return t.entry(int(hostID - 1)), true
}

// State computes a host's state at our time now (docs/delta.md "Host states"),
// with the io_timeout found in that host's own lease and W.
func (t *HostTable) State(hostID, now, ourID uint64, w int) HostState {
	h, ok := t.Host(hostID)
	if !ok {
		return HostFree
	}
	return HostStateOf(&h, t.firstCheck, now, ourID, w)
}

// HostStateOf is the docs/delta.md "Host states" rule list for one entry:
// DEAD if another host's lease is marked DEAD_EXT, FREE if released, LIVE
// if it is us, UNKNOWN while no change was seen since we started watching
// and less than 8N passed, LIVE within 8N of the last change, DEAD after
// more than 8N+W (never for a NO_TIMEOUT lease: FAIL), FAIL in between. N
// is the host's own io_timeout.
func HostStateOf(h *HostStatus, firstCheck, now, ourID uint64, w int) HostState {
	fail := uint64(IDRenewalFailSeconds(int(h.IOTimeout)))
	dead := uint64(HostDeadSeconds(int(h.IOTimeout), w))
	last := h.LastLive
	if last == 0 {
		last = firstCheck
	}
	var since uint64
	if now > last {
		since = now - last
	}
	switch {
	case h.DeadExt() && h.HostID != ourID:
		return HostDead // 5.1.1: also for a released lease
	case h.Timestamp == 0:
		return HostFree
	case h.OwnerID == ourID:
		return HostLive
	case since <= fail && firstCheck == h.LastLive:
		return HostUnknown
	case since <= fail:
		return HostLive
	case since > dead && !h.NoTimeout():
		return HostDead
	}
	return HostFail
}

// GetHosts answers get_hosts (docs/delta.md "get_hosts"): hostID 0 lists every
// host whose lease has a non-zero timestamp; a given hostID gives exactly
// that entry (FREE with zeros if never seen), or nothing beyond max_hosts.
// Before the first processing it fails with -EAGAIN.
func (t *HostTable) GetHosts(hostID, now, ourID uint64, w int) ([]HostInfo, error) {
	if !t.Ready() {
		return nil, rescode.ErrEAGAIN
	}
	info := func(h *HostStatus) HostInfo {
		return HostInfo{HostID: h.HostID, Generation: h.OwnerGeneration, Timestamp: h.Timestamp,
			IOTimeout: uint32(h.IOTimeout), State: HostStateOf(h, t.firstCheck, now, ourID, w), DeadExt: h.DeadExt()}
	}
	if hostID != 0 {
		if hostID > uint64(t.maxHosts) {
			return nil, nil
		}
		h := t.entry(int(hostID - 1))
		return []HostInfo{info(&h)}, nil
	}
	var out []HostInfo
	for i := range t.hosts {
		if t.hosts[i].Timestamp != 0 {
			out = append(out, info(&t.hosts[i]))
		}
	}
	return out, nil
}

// Statuses lists, in host_id order, the entries with a non-zero last_live
// or owner_id (what host_status reports).
func (t *HostTable) Statuses() []HostStatus {
	var out []HostStatus
	for _, h := range t.hosts {
		if h.LastLive != 0 || h.OwnerID != 0 {
			out = append(out, h)
		}
	}
	return out
}
