package manager

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/handover"
	"github.com/gosanlock/gosanlock/paxos"
)

// ErrHandoverBusy is returned by HandoverState while the manager has work
// that a handover cannot carry: a lockspace being added or removed, a
// resource being acquired or released, a command waiting on a client.
var ErrHandoverBusy = errors.New("lease manager busy")

// HandoverState maps the joined lockspaces, the held resource tokens and
// the orphans onto the handover format (docs/upgrade.md "The state").
// clientIndex returns the index in State.Clients of a registered client;
// a token whose client has none is an error (the state would not
// validate). Times become durations before now on the lockspaces'
// clock (CLOCK_MONOTONIC in the daemon). It refuses, with ErrHandoverBusy,
// while anything is in transition; the caller retries or fails the
// handover. The wdmd session fds are not mapped yet (a lockspace with a
// wdmd session makes it fail): see docs/upgrade.md.
//
// keep adds a file (a wdmd session's connection) to the state's fd table
// and returns its index.
func (m *Manager) HandoverState(clientIndex func(ClientID) (int, bool), keep func(*os.File) int) (
	[]handover.Lockspace, []handover.Token, []handover.Orphan, error) {
	ls, rs := m.Lockspaces, m.Resources
	// The final state is taken with the renewals paused (PauseRenewals,
	// after every command in flight ended) and must be complete; a
	// snapshot taken while serving only previews it, so what is in
	// transition is left out of it instead of failing the handover.
	final := false
	for _, run := range ls.runners() {
		final = final || run.Paused()
	}
	ls.mu.Lock()
	if n := len(ls.lists[listAdd]) + len(ls.lists[listRem]); n > 0 && final {
		ls.mu.Unlock()
		return nil, nil, nil, fmt.Errorf("%w: %d lockspace(s) being added or removed", ErrHandoverBusy, n)
	}
	spaces := append([]*space(nil), ls.lists[listSpaces]...)
	ls.mu.Unlock()

	var out []handover.Lockspace
	for i := len(spaces) - 1; i >= 0; i-- { // oldest first
		sp := spaces[i]
		ls.mu.Lock()
		run, wd, wdActive, removing, dead := sp.run, sp.wd, sp.wdActive, sp.removeReq, sp.end.dead()
		extUsed, byOrphans, retries := sp.externalUsed, sp.usedByOrphans, sp.usedRetries
		listeners := append([]Listener(nil), sp.listeners...)
		ls.mu.Unlock()
		if run == nil {
			return nil, nil, nil, fmt.Errorf("%w: lockspace %s has no runner", ErrHandoverBusy, sp.ls.Name)
		}
		var wdmd *handover.WdmdSession
		if wd != nil {
			hw, ok := wd.(interface {
				Handover() (*os.File, string, bool, error)
			})
			if !ok {
				return nil, nil, nil, fmt.Errorf("lockspace %s: its watchdog session cannot be handed over", sp.ls.Name)
			}
			f, name, _, err := hw.Handover()
			if err != nil {
				return nil, nil, nil, fmt.Errorf("lockspace %s: wdmd session: %w", sp.ls.Name, err)
			}
			wdmd = &handover.WdmdSession{FD: keep(f), Name: name, Active: wdActive}
		}
		// Event listeners: the same connections (docs/upgrade.md
		// "Adopting event listeners").
		var lfds []int
		for _, l := range listeners {
			hl, ok := l.(interface{ HandoverFile() (*os.File, error) })
			if !ok {
				return nil, nil, nil, fmt.Errorf("lockspace %s: its event listener fd %d cannot be handed over",
					sp.ls.Name, l.FD())
			}
			f, err := hl.HandoverFile()
			if err != nil {
				return nil, nil, nil, fmt.Errorf("lockspace %s: event listener fd %d: %w", sp.ls.Name, l.FD(), err)
			}
			lfds = append(lfds, keep(f))
		}
		if run.Paused() && (removing || dead) {
			return nil, nil, nil, fmt.Errorf("%w: lockspace %s is being removed", ErrHandoverBusy, sp.ls.Name)
		}
		st := run.Status()
		h := handover.Lockspace{
			Name: sp.ls.Name, HostID: sp.ls.HostID, Path: sp.ls.Disk.Path, Offset: sp.ls.Disk.Offset,
			IOTimeout: uint32(st.IOTimeout), SectorSize: uint32(st.SectorSize), AlignSize: uint32(st.AlignSize),
			Generation: st.HostGeneration, Timestamp: st.RenewalLastSuccess,
			Removing: removing, SpaceDead: dead, Wdmd: wdmd,
			ExternalUsed: extUsed, UsedByOrphans: byOrphans, UsedRetries: retries, EventListeners: lfds,
		}
		if wdmd != nil && wdActive {
			wdmd.Expire = st.RenewalLastSuccess + uint64(delta.IDRenewalFailSeconds(st.IOTimeout))
		}
		// Our monotime is CLOCK_MONOTONIC seconds: the renewal completed
		// at or after second RenewalLastSuccess.
		last := time.Duration(st.RenewalLastSuccess) * time.Second
		h.LastRenewalAgo = max(ls.cfg.Clock.Now()-last, 0)
		h.LastRenewalWall = time.Now().Add(-h.LastRenewalAgo).UnixNano()
		for _, e := range run.Renewals() {
			h.History = append(h.History, handover.Renewal{Timestamp: e.Timestamp, ReadMs: e.ReadMs,
				WriteMs: e.WriteMs, NextTimeouts: e.NextTimeouts, NextErrors: e.NextErrors})
		}
		if run.Paused() {
			// The final state: the renewals are paused, and the new image
			// continues them from our record as last written.
			r, err := run.Resumable()
			if err != nil {
				return nil, nil, nil, fmt.Errorf("lockspace %s: %w", sp.ls.Name, err)
			}
			h.Leader = leaderOut(&r.Leader)
			h.Leader.Raw = make([]byte, diskfmt.LeaderSize)
			r.Leader.Encode(h.Leader.Raw)
			h.Generation, h.Timestamp, h.AcquireLastSuccess = r.Leader.OwnerGeneration, r.LastSuccess, r.AcquireLastSuccess
			last = time.Duration(r.LastSuccess) * time.Second
			h.LastRenewalAgo = max(ls.cfg.Clock.Now()-last, 0)
			h.LastRenewalWall = time.Now().Add(-h.LastRenewalAgo).UnixNano()
			h.History = h.History[:0]
			for _, e := range r.History {
				h.History = append(h.History, handover.Renewal{Timestamp: e.Timestamp, ReadMs: e.ReadMs,
					WriteMs: e.WriteMs, NextTimeouts: e.NextTimeouts, NextErrors: e.NextErrors})
			}
			h.HostTable = hostTableOut(r.Hosts)
		}
		if len(h.History) > handoverMaxHistory {
			h.History = h.History[len(h.History)-handoverMaxHistory:]
		}
		out = append(out, h)
	}

	rs.mu.Lock()
	defer rs.mu.Unlock()
	var toks []handover.Token
	var orphans []handover.Orphan
	tokOf := map[*token]handover.Token{}
	for key, r := range rs.res {
		if !final && (r.list == resAdd || r.list == resRem || r.releasing || r.converting || r.examining ||
			r.held == nil) {
			continue
		}
		switch r.list {
		case resAdd, resRem:
			return nil, nil, nil, fmt.Errorf("%w: resource %s:%s is being %s", ErrHandoverBusy,
				key.space, key.name, map[resList]string{resAdd: "acquired", resRem: "released"}[r.list])
		}
		if r.releasing || r.converting || r.examining || r.held == nil {
			return nil, nil, nil, fmt.Errorf("%w: resource %s:%s has an operation in progress", ErrHandoverBusy,
				key.space, key.name)
		}
		if !r.opMu.TryLock() {
			if !final {
				continue
			}
			return nil, nil, nil, fmt.Errorf("%w: resource %s:%s has a disk operation in progress", ErrHandoverBusy,
				key.space, key.name)
		}
		hs := r.held.State()
		r.opMu.Unlock()
		lease := handover.Lease{Lockspace: key.space, Resource: key.name, Mode: handover.ModeEX,
			Lver: hs.Leader.Lver, Leader: leaderOut(&hs.Leader), Restrict: r.restrict,
			KillPath: r.killpath, KillArgs: r.killargs, Hold: holdOut(&hs)}
		lease.Leader.Raw = make([]byte, diskfmt.LeaderSize)
		hs.Leader.Encode(lease.Leader.Raw)
		if r.shared {
			lease.Mode = handover.ModeSH
		}
		for _, d := range r.disks {
			lease.Disks = append(lease.Disks, handover.Disk{Path: d.Path, Offset: d.Offset})
		}
		if r.list == resOrphan {
			orphans = append(orphans, handover.Orphan{Lease: lease, Pid: r.pid})
			continue
		}
		for _, t := range r.tokens {
			ci, ok := clientIndex(t.client)
			if !ok && !final {
				continue
			}
			if !ok {
				return nil, nil, nil, fmt.Errorf("%w: token %s:%s of pid %d has no connection", ErrHandoverBusy,
					key.space, key.name, t.pid)
			}
			tl := lease
			tl.Flags, tl.ResFlags = t.flags, t.res.Flags
			if !t.shared() {
				tl.Lver = t.lver
			}
			tokOf[t] = handover.Token{Lease: tl, Client: ci, Pid: t.pid}
		}
	}
	// Each client's tokens in its own order (what inquire lists).
	for _, lc := range rs.leases {
		for _, t := range lc.tokens {
			if ht, ok := tokOf[t]; ok {
				toks = append(toks, ht)
				delete(tokOf, t)
			}
		}
	}
	for _, ht := range tokOf {
		toks = append(toks, ht)
	}
	for id, lc := range rs.leases {
		if lc.busy && final {
			return nil, nil, nil, fmt.Errorf("%w: a command waits on client %d", ErrHandoverBusy, id)
		}
	}
	return out, toks, orphans, nil
}

// handoverMaxHistory bounds the renewal history handed over.
const handoverMaxHistory = 1000

func leaderOut(l *diskfmt.Leader) handover.Leader {
	return handover.Leader{
		Magic: l.Magic, Version: l.Version, Flags: l.Flags, SectorSize: l.SectorSize,
		NumHosts: l.NumHosts, MaxHosts: l.MaxHosts, OwnerID: l.OwnerID, OwnerGeneration: l.OwnerGeneration,
		Lver: l.Lver, SpaceName: cstr(l.SpaceName[:]), ResourceName: cstr(l.ResourceName[:]),
		Timestamp: l.Timestamp, Checksum: l.Checksum, IOTimeout: l.IOTimeout, WriteID: l.WriteID,
		WriteGeneration: l.WriteGeneration, WriteTimestamp: l.WriteTimestamp,
	}
}

func cstr(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

func holdOut(hs *paxos.HeldState) *handover.Hold {
	d := &hs.Dblock
	return &handover.Hold{
		Dblock: handover.Dblock{Mbal: d.Mbal, Bal: d.Bal, Inp: d.Inp, Inp2: d.Inp2, Inp3: d.Inp3, Lver: d.Lver,
			Checksum: d.Checksum, Flags: d.Flags},
		SectorSize: uint32(hs.Geometry.SectorSize), AlignSize: uint32(hs.Geometry.AlignSize),
		Shared: hs.Shared, EraseAll: hs.EraseAll, UndoShared: hs.UndoShared,
		LVB: hs.LVB, HasLVB: hs.LVB != nil, LVBDirty: hs.LVBDirty,
	}
}

// holdIn is the inverse of holdOut with the leader record of the lease.
func holdIn(l *handover.Lease) (paxos.HeldState, error) {
	h := l.Hold
	if h == nil || len(l.Leader.Raw) != diskfmt.LeaderSize {
		return paxos.HeldState{}, errors.New("no paxos hold state")
	}
	ld, err := diskfmt.DecodeLeader(l.Leader.Raw)
	if err != nil {
		return paxos.HeldState{}, err
	}
	g, ok := diskfmt.LookupGeometry(int(h.SectorSize), int(h.AlignSize))
	if !ok {
		return paxos.HeldState{}, fmt.Errorf("sizes %d/%d", h.SectorSize, h.AlignSize)
	}
	d := h.Dblock
	st := paxos.HeldState{Leader: ld, Geometry: g, Shared: h.Shared, EraseAll: h.EraseAll, UndoShared: h.UndoShared,
		LVBDirty: h.LVBDirty,
		Dblock: diskfmt.Dblock{Mbal: d.Mbal, Bal: d.Bal, Inp: d.Inp, Inp2: d.Inp2, Inp3: d.Inp3, Lver: d.Lver,
			Checksum: d.Checksum, Flags: d.Flags}}
	if h.HasLVB {
		if len(h.LVB) != g.SectorSize {
			return paxos.HeldState{}, fmt.Errorf("lvb of %d bytes", len(h.LVB))
		}
		st.LVB = append([]byte(nil), h.LVB...)
	}
	return st, nil
}

// hostTableOut maps a paused runner's host table onto the state (nil when
// there is none, or when a host name read from disk is not UTF-8, which
// the state cannot carry: the new image then rebuilds the table from its
// first renewal read, docs/upgrade.md "Adopting lockspaces").
func hostTableOut(t *delta.HostTableState) *handover.HostTable {
	if t == nil {
		return nil
	}
	out := &handover.HostTable{FirstCheck: t.FirstCheck, LastCheck: t.LastCheck, Checked: t.Checked,
		Hosts: make([]handover.HostRecord, 0, len(t.Hosts))}
	for _, h := range t.Hosts {
		if !utf8.ValidString(h.OwnerName) || strings.IndexByte(h.OwnerName, 0) >= 0 {
			return nil
		}
		out.Hosts = append(out.Hosts, handover.HostRecord{HostID: h.HostID, LastCheck: h.LastCheck,
			LastLive: h.LastLive, LastReq: h.LastReq, OwnerID: h.OwnerID, OwnerGeneration: h.OwnerGeneration,
			Timestamp: h.Timestamp, IOTimeout: h.IOTimeout, OwnerName: h.OwnerName, LeaseBad: h.LeaseBad})
	}
	if r := t.Staged; r != nil {
		out.Staged = &handover.StagedRead{Count: r.Count}
		for _, x := range r.Records {
			raw := make([]byte, diskfmt.LeaderSize)
			x.Leader.Encode(raw)
			out.Staged.Records = append(out.Staged.Records, handover.StagedRecord{HostID: x.HostID, Raw: raw, OurBit: x.OurBit})
		}
	}
	return out
}

// hostTableIn is the inverse of hostTableOut (the state is validated:
// each staged record is LeaderSize bytes).
func hostTableIn(t *handover.HostTable) (*delta.HostTableState, error) {
	if t == nil {
		return nil, nil
	}
	out := &delta.HostTableState{FirstCheck: t.FirstCheck, LastCheck: t.LastCheck, Checked: t.Checked,
		Hosts: make([]delta.HostStatus, 0, len(t.Hosts))}
	for _, h := range t.Hosts {
		out.Hosts = append(out.Hosts, delta.HostStatus{HostID: h.HostID, LastCheck: h.LastCheck,
			LastLive: h.LastLive, LastReq: h.LastReq, OwnerID: h.OwnerID, OwnerGeneration: h.OwnerGeneration,
			Timestamp: h.Timestamp, IOTimeout: h.IOTimeout, OwnerName: h.OwnerName, LeaseBad: h.LeaseBad})
	}
	if r := t.Staged; r != nil {
		out.Staged = &delta.StagedRead{Count: r.Count}
		for _, x := range r.Records {
			ld, err := diskfmt.DecodeLeader(x.Raw)
			if err != nil {
				return nil, fmt.Errorf("host table: staged record of host_id %d: %w", x.HostID, err)
			}
			out.Staged.Records = append(out.Staged.Records, delta.StagedHost{HostID: x.HostID, Leader: ld, OurBit: x.OurBit})
		}
	}
	return out, nil
}

// ExpectAdd notes that an ADD_LOCKSPACE of lockspace name, handed over by
// a live reexec, will run (the new image, before it serves): until it
// does, inq reports the lockspace in progress, as the old image did.
func (m *Lockspaces) ExpectAdd(name string) {
	m.mu.Lock()
	m.expectLocked(name)
	m.mu.Unlock()
}

func (m *Lockspaces) expectLocked(name string) {
	if m.restarting == nil {
		m.restarting = map[string]int{}
	}
	m.restarting[name]++
}

// ErrRestart is the cancel cause of a request that a live reexec hands
// over to the new image, which runs it again (docs/upgrade.md "Pending
// requests"). A command cancelled with it leaves what a failed attempt
// leaves.
var ErrRestart = errors.New("request restarted by a handover")

// cancelAdd ends a join whose ADD_LOCKSPACE is handed over: as a
// rem_lockspace during the add (the acquire is aborted or the add undone,
// the entry freed, the delta lease released if it was acquired), unless
// the join has already completed, which then stands. It returns the add's
// result once the entry is either joined or gone.
func (m *Lockspaces) cancelAdd(sp *space) error {
	m.mu.Lock()
	if sp.list == listAdd {
		sp.removeReq = true
		sp.cancel()
		m.expectLocked(sp.ls.Name)
	}
	m.mu.Unlock()
	<-sp.addDone
	if sp.addResult != nil {
		<-sp.gone
	}
	return sp.addResult
}
