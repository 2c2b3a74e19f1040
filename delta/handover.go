package delta

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

// Handover of a joined lockspace (docs/upgrade.md "Adopting lockspaces"):
// the serving daemon pauses its renewals (Pause), reads the state a
// renewal needs (HandoverState) and hands it to a new image, which checks
// it (CheckAdopt) and continues the same membership with RunAdopted: no acquire, the same
// generation, and the next renewal due at the handed-over last success +
// id_renewal_seconds, exactly as if the renewals had never changed hands.
// Both sides use CLOCK_MONOTONIC seconds (the same clock in every process
// of a boot), so the last-success time keeps its meaning and every expiry
// computed from it (own-lease check, wdmd, other hosts) is unchanged.

// ErrNoHandover is returned by HandoverState for a lockspace whose renewals
// cannot change hands now: not joined, stopped, halted, or its last
// renewal attempt failed (the new image could not know whether that write
// landed).
var ErrNoHandover = errors.New("delta: lockspace cannot be handed over now")

// RenewalState is the state a renewal loop continues from.
type RenewalState struct {
	// Leader is our record as last written (acquire or renewal).
	Leader diskfmt.Leader
	// LastSuccess is the monotime of the last successful acquire or
	// renewal (the timestamp in Leader).
	LastSuccess uint64
	// AcquireLastSuccess is the monotime of the acquire, for the status.
	AcquireLastSuccess uint64
	// History is the renewal history, oldest first.
	History []HistoryEntry
	// Hosts is the host table (nil: none, the table is rebuilt from the
	// first renewal read as after a join).
	Hosts *HostTableState
}

// pauseGate lets a handover stop the renewal loop between two renewals.
type pauseGate struct {
	mu     sync.Mutex
	sem    chan struct{} // holds a token while a renewal runs or while paused
	paused bool
	halted bool // the halted flag before the pause
	cur    *RenewalState
	ok     bool // the renewer's last attempt succeeded
	live   bool // a renewal loop runs
}

func (g *pauseGate) init() {
	g.mu.Lock()
	if g.sem == nil {
		g.sem = make(chan struct{}, 1)
	}
	g.mu.Unlock()
}

// enter is called by the renewal loop before a renewal: it waits while
// paused; false when ctx ended meanwhile.
func (ls *Lockspace) enterRenewal(ctx context.Context) bool {
	g := &ls.pause
	g.init()
	select {
	case g.sem <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// leaveRenewal is called by the renewal loop after a renewal (and once
// before the first, with enter=false) to publish what a handover needs.
func (ls *Lockspace) leaveRenewal(r *renewer, entered bool) {
	g := &ls.pause
	g.init()
	g.mu.Lock()
	g.cur = &RenewalState{Leader: r.last, LastSuccess: r.lastSuccess}
	g.ok, g.live = r.prevOK, true
	g.mu.Unlock()
	if entered {
		<-g.sem
	}
}

// Pause waits for a renewal in flight to end and holds every further one
// until Unpause. While paused, a Run or RunAdopted whose context ends
// returns without releasing the lease: the lease may be another
// process's by then. It fails if ctx ends first.
func (ls *Lockspace) Pause(ctx context.Context) error {
	g := &ls.pause
	g.init()
	select {
	case g.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("delta: pause %s:%d: %w", ls.cfg.Space, ls.cfg.HostID, ctx.Err())
	}
	g.mu.Lock()
	g.paused = true
	g.halted = ls.halted.Swap(true)
	g.mu.Unlock()
	return nil
}

// Unpause undoes Pause: renewals go on (a due one at once).
func (ls *Lockspace) Unpause() {
	g := &ls.pause
	g.mu.Lock()
	if !g.paused {
		g.mu.Unlock()
		return
	}
	g.paused = false
	ls.halted.Store(g.halted)
	g.mu.Unlock()
	<-g.sem
}

// HandoverState returns the state a RunAdopted in another process continues
// from. Call it while paused; it fails with ErrNoHandover when the
// renewals cannot change hands.
func (ls *Lockspace) HandoverState() (RenewalState, error) {
	g := &ls.pause
	g.mu.Lock()
	paused, cur, ok, live, wasHalted := g.paused, g.cur, g.ok, g.live, g.halted
	g.mu.Unlock()
	switch {
	case !paused:
		return RenewalState{}, fmt.Errorf("%w: not paused", ErrNoHandover)
	case !live || cur == nil:
		return RenewalState{}, fmt.Errorf("%w: not renewing", ErrNoHandover)
	case wasHalted:
		return RenewalState{}, fmt.Errorf("%w: renewals halted", ErrNoHandover)
	case !ok:
		return RenewalState{}, fmt.Errorf("%w: the last renewal failed", ErrNoHandover)
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.status.Stopped || !ls.status.Joined {
		return RenewalState{}, fmt.Errorf("%w: not joined", ErrNoHandover)
	}
	r := *cur
	r.AcquireLastSuccess = ls.status.AcquireLastSuccess
	r.History = ls.history.Entries()
	// A read not processed yet travels as the table's staged read.
	if ls.hosts != nil {
		if h, ok := ls.hosts.export(); ok {
			r.Hosts = &h
		}
	}
	return r, nil
}

// CheckAdopt checks that st can continue this (not yet running)
// lockspace: the geometry is known (Config.Geometry), the record is a
// valid delta lease of this lockspace owned by our host_id with a
// generation, its timestamp is the last success, and the last success is
// not in the future. It does no I/O.
func (ls *Lockspace) CheckAdopt(st RenewalState) error {
	g := ls.lease.Geometry
	if _, ok := diskfmt.LookupGeometry(g.SectorSize, g.AlignSize); !ok || g.MaxHosts == 0 {
		return fmt.Errorf("delta: adopt %s: unknown geometry %s: %w", ls.cfg.Space, g, rescode.ErrEINVAL)
	}
	if ls.cfg.HostID > uint64(g.MaxHosts) {
		return fmt.Errorf("delta: adopt %s: host_id %d beyond the lockspace", ls.cfg.Space, ls.cfg.HostID)
	}
	l := &st.Leader
	switch {
	case l.Magic != diskfmt.DeltaMagic:
		return fmt.Errorf("delta: adopt %s: record magic %#x is not a delta lease", ls.cfg.Space, l.Magic)
	case l.Checksum != l.ComputeChecksum():
		return fmt.Errorf("delta: adopt %s: record checksum mismatch", ls.cfg.Space)
	case cstr(l.SpaceName[:]) != ls.cfg.Space:
		return fmt.Errorf("delta: adopt %s: record of lockspace %q", ls.cfg.Space, cstr(l.SpaceName[:]))
	case l.OwnerID != ls.cfg.HostID:
		return fmt.Errorf("delta: adopt %s: record owned by host_id %d, not %d", ls.cfg.Space, l.OwnerID, ls.cfg.HostID)
	case l.OwnerGeneration == 0:
		return fmt.Errorf("delta: adopt %s: record without a generation", ls.cfg.Space)
	case l.Timestamp == 0 || l.Timestamp != st.LastSuccess:
		return fmt.Errorf("delta: adopt %s: record timestamp %d, last success %d", ls.cfg.Space, l.Timestamp, st.LastSuccess)
	case st.LastSuccess > ls.now():
		return fmt.Errorf("delta: adopt %s: last success %d is in the future (now %d)", ls.cfg.Space, st.LastSuccess, ls.now())
	}
	if st.Hosts != nil {
		if ls.hosts == nil {
			return fmt.Errorf("delta: adopt %s: host table without a geometry", ls.cfg.Space)
		}
		if err := ls.hosts.checkRestore(st.Hosts, ls.now()); err != nil {
			return fmt.Errorf("delta: adopt %s: %w", ls.cfg.Space, err)
		}
	}
	return nil
}

func cstr(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// RunAdopted is Run for a lockspace handed over by another process: it
// publishes st as if this process had acquired and renewed the lease,
// closes Joined at once, and renews from st.Leader with the next renewal
// at st.LastSuccess + id_renewal_seconds (at once if that is past). The
// first renewal's read checks that our record on disk is still exactly
// st.Leader (docs/delta.md "One renewal"); if not, the renewals fail and
// the own-lease check does the rest. Like Run, it releases the lease when
// ctx ends, unless paused or halted.
func (ls *Lockspace) RunAdopted(ctx context.Context, st RenewalState) error {
	defer close(ls.done)
	if err := ls.CheckAdopt(st); err != nil {
		ls.mu.Lock()
		ls.status.AcquireLastResult, ls.status.RenewalLastResult = rescode.ErrEINVAL, rescode.ErrEINVAL
		ls.status.Stopped = true
		ls.mu.Unlock()
		close(ls.joined)
		return err
	}
	ls.mu.Lock()
	ls.status.AcquireLastResult, ls.status.RenewalLastResult = rescode.OK, rescode.OK
	ls.status.AcquireLastAttempt, ls.status.AcquireLastSuccess = st.AcquireLastSuccess, st.AcquireLastSuccess
	ls.status.RenewalLastAttempt, ls.status.RenewalLastSuccess = st.LastSuccess, st.LastSuccess
	ls.status.HostGeneration = st.Leader.OwnerGeneration
	ls.status.Version = st.Leader.Version
	ls.status.NoTimeout = st.Leader.NoTimeout()
	for _, e := range st.History {
		ls.history.Success(e.Timestamp, e.ReadMs, e.WriteMs)
		if n := len(ls.history.entries); n > 0 {
			p := &ls.history.entries[ls.history.prev]
			p.NextTimeouts, p.NextErrors = e.NextTimeouts, e.NextErrors
		}
	}
	if st.Hosts != nil {
		// Checked by CheckAdopt: the table continues as if this process
		// had made every processing (docs/upgrade.md "Adopting lockspaces").
		ls.hosts.restore(st.Hosts)
		ls.processed = ls.status.Reads
		if st.Hosts.Staged != nil {
			ls.processed-- // any value but Reads: the staged read is new
		}
	}
	ls.status.Joined = true
	ls.mu.Unlock()
	close(ls.joined)

	r := renewer{ls: ls, last: st.Leader, prevOK: true, lastSuccess: st.LastSuccess}
	// A handover that took longer than the rest of the renewal interval:
	// renew at once rather than after the loop's half second.
	if ls.now()-r.lastSuccess >= uint64(ls.timing.IDRenewalSeconds()) && ls.enterRenewal(ctx) {
		r.renew(ctx)
		ls.leaveRenewal(&r, true)
	}
	return ls.renewUntilDone(ctx, &r)
}

// Paused reports whether Pause holds the renewals.
func (ls *Lockspace) Paused() bool {
	g := &ls.pause
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.paused
}

// HostTableState is a host table as handed over (docs/upgrade.md
// "Adopting lockspaces"): every time is our monotime (CLOCK_MONOTONIC
// seconds, the same clock in every process of a boot), carried as is.
type HostTableState struct {
	FirstCheck uint64 // the first processing (non-zero)
	LastCheck  uint64 // the latest processing
	Checked    int    // records the latest processing covered
	// Hosts are the stored entries, host_id 1..len(Hosts) in order.
	Hosts []HostStatus
	// Staged is the latest renewal read when it was not processed yet
	// (nil: none); the new runner processes it at its first ProcessHosts,
	// as the old one would have.
	Staged *StagedRead
}

// StagedRead is a renewal read taken by the host table and not yet
// applied: the records that differ from the table.
type StagedRead struct {
	Count   int          // records the read covered (host_ids 1..Count)
	Records []StagedHost // in host_id order
}

// StagedHost is one record of a StagedRead.
type StagedHost struct {
	HostID uint64
	Leader diskfmt.Leader
	OurBit bool // our bit is set in the host's bitmap
}

// export returns the table as a HostTableState, with a read staged and
// not yet applied; false when no read was ever processed.
func (t *HostTable) export() (HostTableState, bool) {
	if !t.Ready() {
		return HostTableState{}, false
	}
	st := HostTableState{FirstCheck: t.firstCheck, LastCheck: t.lastCheck, Checked: t.checked,
		Hosts: append([]HostStatus(nil), t.hosts...)}
	if t.staged {
		st.Staged = &StagedRead{Count: t.count}
		for _, r := range t.changed {
			st.Staged.Records = append(st.Staged.Records, StagedHost{HostID: uint64(r.index + 1), Leader: r.rec, OurBit: r.ourBit})
		}
	}
	return st, true
}

// checkRestore checks that st can be the table at our time now: sizes
// within max_hosts, entries in host_id order, and no time in the future
// or before the first processing (either would move a host's last change
// and so its liveness).
func (t *HostTable) checkRestore(st *HostTableState, now uint64) error {
	switch {
	case st.FirstCheck == 0 || st.FirstCheck > st.LastCheck || st.LastCheck > now:
		return fmt.Errorf("host table checks %d..%d, now %d", st.FirstCheck, st.LastCheck, now)
	case st.Checked < 0 || st.Checked > t.maxHosts || len(st.Hosts) > t.maxHosts:
		return fmt.Errorf("host table of %d entries, %d checked, beyond %d hosts", len(st.Hosts), st.Checked, t.maxHosts)
	}
	for i := range st.Hosts {
		h := &st.Hosts[i]
		bad := func(v uint64) bool { return v != 0 && (v < st.FirstCheck || v > st.LastCheck) }
		switch {
		case h.HostID != uint64(i+1):
			return fmt.Errorf("host table entry %d has host_id %d", i, h.HostID)
		case bad(h.LastCheck) || bad(h.LastLive) || bad(h.LastReq):
			return fmt.Errorf("host table host_id %d: times %d/%d/%d outside %d..%d",
				h.HostID, h.LastCheck, h.LastLive, h.LastReq, st.FirstCheck, st.LastCheck)
		case h.LeaseBad < 0:
			return fmt.Errorf("host table host_id %d: lease_bad %d", h.HostID, h.LeaseBad)
		case len(h.OwnerName) > diskfmt.NameLen:
			return fmt.Errorf("host table host_id %d: owner name of %d bytes", h.HostID, len(h.OwnerName))
		}
	}
	if r := st.Staged; r != nil {
		if r.Count < 0 || r.Count > t.maxHosts || len(r.Records) > r.Count {
			return fmt.Errorf("staged read of %d records, %d changed, beyond %d hosts", r.Count, len(r.Records), t.maxHosts)
		}
		prev := uint64(0)
		for _, h := range r.Records {
			if h.HostID <= prev || h.HostID > uint64(r.Count) {
				return fmt.Errorf("staged read: host_id %d after %d (of %d)", h.HostID, prev, r.Count)
			}
			prev = h.HostID
		}
	}
	return nil
}

// restore replaces the (unprocessed) table with st, checked by
// checkRestore.
func (t *HostTable) restore(st *HostTableState) {
	t.firstCheck, t.lastCheck, t.checked = st.FirstCheck, st.LastCheck, st.Checked
	t.hosts = append([]HostStatus(nil), st.Hosts...)
	t.sums = nil // learned against the entries just replaced (see Stage)
	t.staged, t.changed, t.count = false, t.changed[:0], 0
	if r := st.Staged; r != nil {
		t.staged, t.count = true, r.Count
		for _, h := range r.Records {
			t.changed = append(t.changed, stagedRecord{index: int(h.HostID - 1), rec: h.Leader, ourBit: h.OurBit})
		}
	}
}
