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
	"github.com/gosanlock/gosanlock/wdmd/wdmdclient"
)

// ErrHandoverBusy is returned by HandoverState while the manager has work
// that a handover cannot carry: a lockspace being added or removed, a
// resource being acquired or released, a command waiting on a client.
var ErrHandoverBusy = errors.New("lease manager busy")

// A WatchdogHandover is the part of a watchdog session that a handover
// carries: a close-on-exec duplicate of its connection, its name and
// whether it is activated. Every WatchdogSession has it; one that cannot
// be handed over (a test's) returns an error.
type WatchdogHandover interface {
	Handover() (f *os.File, name string, active bool, err error)
}

// A ListenerHandover is the part of an event listener that a handover
// carries: a close-on-exec duplicate of its connection (docs/upgrade.md
// "Adopting event listeners"). Every Listener has it.
type ListenerHandover interface {
	HandoverFile() (*os.File, error)
}

var _ WatchdogSession = (*wdmdclient.Session)(nil)

// HandoverState maps the joined lockspaces, the held resource tokens and
// the orphans onto the handover format (docs/upgrade.md "The state").
// clientIndex returns the index in State.Clients of a registered client;
// a token whose client has none is an error (the state would not
// validate). keep adds a file (a wdmd session's or an event listener's
// connection) to the state's fd table and returns its index.
//
// With the renewals paused (PauseRenewals, after every command in flight
// ended) this is the final state and must be complete: it refuses, with
// ErrHandoverBusy, while anything is in transition, and the caller fails
// the handover. A snapshot taken while serving only previews the final
// state, so what is in transition is left out of it instead.
func (m *Manager) HandoverState(clientIndex func(ClientID) (int, bool), keep func(*os.File) int) (
	[]handover.Lockspace, []handover.Token, []handover.Orphan, error) {
	ls := m.Lockspaces
	final := ls.renewalsPaused()
	spaces, err := ls.handoverSpaces(final)
	if err != nil {
		return nil, nil, nil, err
	}
	var out []handover.Lockspace
	for _, sp := range spaces {
		h, err := ls.handoverSpace(sp, keep)
		if err != nil {
			return nil, nil, nil, err
		}
		out = append(out, h)
	}
	toks, orphans, err := m.Resources.handoverResources(final, clientIndex)
	if err != nil {
		return nil, nil, nil, err
	}
	return out, toks, orphans, nil
}

// renewalsPaused reports whether a lockspace's renewals are paused: the
// state taken now is the final one.
func (m *Lockspaces) renewalsPaused() bool {
	for _, run := range m.runners() {
		if run.Paused() {
			return true
		}
	}
	return false
}

// handoverSpaces lists the joined lockspaces, oldest first. In the final
// state no lockspace may be being added or removed.
func (m *Lockspaces) handoverSpaces(final bool) ([]*space, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := len(m.lists[listAdd]) + len(m.lists[listRem]); n > 0 && final {
		return nil, fmt.Errorf("%w: %d lockspace(s) being added or removed", ErrHandoverBusy, n)
	}
	joined := m.lists[listSpaces]
	out := make([]*space, 0, len(joined))
	for i := len(joined) - 1; i >= 0; i-- {
		out = append(out, joined[i])
	}
	return out, nil
}

// handoverSpace maps one joined lockspace: its identity and flags, its
// wdmd session and event listeners (their connections go to keep), and
// its renewal state: the record as last written once the renewals are
// paused, the runner's status before.
func (m *Lockspaces) handoverSpace(sp *space, keep func(*os.File) int) (handover.Lockspace, error) {
	m.mu.Lock()
	run, wd, wdActive, removing, dead := sp.run, sp.wd, sp.wdActive, sp.removeReq, sp.end.dead()
	extUsed, byOrphans, retries := sp.externalUsed, sp.usedByOrphans, sp.usedRetries
	listeners := append([]Listener(nil), sp.listeners...)
	m.mu.Unlock()
	name := sp.ls.Name
	if run == nil {
		return handover.Lockspace{}, fmt.Errorf("%w: lockspace %s has no runner", ErrHandoverBusy, name)
	}
	var wdmd *handover.WdmdSession
	if wd != nil {
		f, wname, _, err := wd.Handover()
		if err != nil {
			return handover.Lockspace{}, fmt.Errorf("lockspace %s: wdmd session: %w", name, err)
		}
		wdmd = &handover.WdmdSession{FD: keep(f), Name: wname, Active: wdActive}
	}
	lfds, err := handoverListeners(name, listeners, keep)
	if err != nil {
		return handover.Lockspace{}, err
	}
	if run.Paused() && (removing || dead) {
		return handover.Lockspace{}, fmt.Errorf("%w: lockspace %s is being removed", ErrHandoverBusy, name)
	}
	st := run.Status()
	h := handover.Lockspace{
		Name: name, HostID: sp.ls.HostID, Path: sp.ls.Disk.Path, Offset: sp.ls.Disk.Offset,
		IOTimeout: uint32(st.IOTimeout), SectorSize: uint32(st.SectorSize), AlignSize: uint32(st.AlignSize),
		Generation: st.HostGeneration, Timestamp: st.RenewalLastSuccess,
		Removing: removing, SpaceDead: dead, Wdmd: wdmd,
		ExternalUsed: extUsed, UsedByOrphans: byOrphans, UsedRetries: retries, EventListeners: lfds,
	}
	if wdmd != nil && wdActive {
		wdmd.Expire = st.RenewalLastSuccess + uint64(delta.IDRenewalFailSeconds(st.IOTimeout))
	}
	m.setLastRenewal(&h, st.RenewalLastSuccess)
	h.History = renewalsOut(run.Renewals())
	if run.Paused() {
		if err := m.handoverRenewalRecord(&h, run); err != nil {
			return handover.Lockspace{}, fmt.Errorf("lockspace %s: %w", name, err)
		}
	}
	if len(h.History) > handoverMaxHistory {
		h.History = h.History[len(h.History)-handoverMaxHistory:]
	}
	return h, nil
}

// handoverListeners hands over the event listeners of lockspace name:
// the same connections (docs/upgrade.md "Adopting event listeners").
func handoverListeners(name string, listeners []Listener, keep func(*os.File) int) ([]int, error) {
	var fds []int
	for _, l := range listeners {
		f, err := l.HandoverFile()
		if err != nil {
			return nil, fmt.Errorf("lockspace %s: event listener fd %d: %w", name, l.FD(), err)
		}
		fds = append(fds, keep(f))
	}
	return fds, nil
}

// handoverRenewalRecord fills h from a paused runner: the new image
// continues the renewals from our delta lease record as last written,
// with its history and host table.
func (m *Lockspaces) handoverRenewalRecord(h *handover.Lockspace, run *delta.Lockspace) error {
	r, err := run.HandoverState()
	if err != nil {
		return err
	}
	h.Leader = leaderOut(&r.Leader)
	h.Leader.Raw = make([]byte, diskfmt.LeaderSize)
	r.Leader.Encode(h.Leader.Raw)
	h.Generation, h.Timestamp, h.AcquireLastSuccess = r.Leader.OwnerGeneration, r.LastSuccess, r.AcquireLastSuccess
	m.setLastRenewal(h, r.LastSuccess)
	h.History = renewalsOut(r.History)
	h.HostTable = hostTableOut(r.Hosts)
	return nil
}

// setLastRenewal sets how long ago, on the lockspaces' clock and on the
// wall clock, the last renewal completed: our monotime is CLOCK_MONOTONIC
// seconds, and the renewal completed at or after second lastSuccess.
func (m *Lockspaces) setLastRenewal(h *handover.Lockspace, lastSuccess uint64) {
	last := time.Duration(lastSuccess) * time.Second
	h.LastRenewalAgo = max(m.cfg.Clock.Now()-last, 0)
	h.LastRenewalWall = time.Now().Add(-h.LastRenewalAgo).UnixNano()
}

// renewalsOut maps a renewal history onto the state.
func renewalsOut(in []delta.HistoryEntry) []handover.Renewal {
	var out []handover.Renewal
	for _, e := range in {
		out = append(out, handover.Renewal{Timestamp: e.Timestamp, ReadMs: e.ReadMs,
			WriteMs: e.WriteMs, NextTimeouts: e.NextTimeouts, NextErrors: e.NextErrors})
	}
	return out
}

// handoverResources maps the held resources: each client's tokens in its
// own order (what inquire lists), and the orphans. In a preview a
// resource in transition is left out; in the final state it is an error.
func (m *Resources) handoverResources(final bool, clientIndex func(ClientID) (int, bool)) (
	[]handover.Token, []handover.Orphan, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var orphans []handover.Orphan
	tokOf := map[*token]handover.Token{}
	for key, r := range m.res {
		hs, ok, err := r.handoverHold(key, final)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			continue
		}
		lease := r.leaseOut(key, &hs)
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
				return nil, nil, fmt.Errorf("%w: token %s:%s of pid %d has no connection", ErrHandoverBusy,
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
	var toks []handover.Token
	for _, lc := range m.leases {
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
	for id, lc := range m.leases {
		if lc.busy && final {
			return nil, nil, fmt.Errorf("%w: a command waits on client %d", ErrHandoverBusy, id)
		}
	}
	return toks, orphans, nil
}

// handoverHold returns the paxos hold of r (under Resources.mu), or ok
// false when r is in transition in a preview. In the final state a
// resource in transition is ErrHandoverBusy.
func (r *resource) handoverHold(key resKey, final bool) (hs paxos.HeldState, ok bool, err error) {
	inTransition := r.list == resAdd || r.list == resRem || r.releasing || r.converting || r.examining ||
		r.held == nil
	if inTransition && !final {
		return hs, false, nil
	}
	switch {
	case r.list == resAdd || r.list == resRem:
		return hs, false, fmt.Errorf("%w: resource %s:%s is being %s", ErrHandoverBusy,
			key.space, key.name, map[resList]string{resAdd: "acquired", resRem: "released"}[r.list])
	case inTransition:
		return hs, false, fmt.Errorf("%w: resource %s:%s has an operation in progress", ErrHandoverBusy,
			key.space, key.name)
	}
	if !r.opMu.TryLock() {
		if !final {
			return hs, false, nil
		}
		return hs, false, fmt.Errorf("%w: resource %s:%s has a disk operation in progress", ErrHandoverBusy,
			key.space, key.name)
	}
	hs = r.held.HandoverState()
	r.opMu.Unlock()
	return hs, true, nil
}

// leaseOut maps r, held as hs, onto the state's lease (the fields that
// every token of it shares).
func (r *resource) leaseOut(key resKey, hs *paxos.HeldState) handover.Lease {
	lease := handover.Lease{Lockspace: key.space, Resource: key.name, Mode: handover.ModeEX,
		Lver: hs.Leader.Lver, Leader: leaderOut(&hs.Leader), Restrict: r.restrict,
		KillPath: r.killpath, KillArgs: r.killargs, Hold: holdOut(hs)}
	lease.Leader.Raw = make([]byte, diskfmt.LeaderSize)
	hs.Leader.Encode(lease.Leader.Raw)
	if r.shared {
		lease.Mode = handover.ModeSH
	}
	for _, d := range r.disks {
		lease.Disks = append(lease.Disks, handover.Disk{Path: d.Path, Offset: d.Offset})
	}
	return lease
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

// ExpectAdd notes that an ADD_LOCKSPACE of lockspace name, handed over as
// a pending request, will run (the new image, before it serves): until it
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

// ErrRestart is the cancel cause of a request that a handover passes
// to the new image, which runs it again (docs/upgrade.md "Pending
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
