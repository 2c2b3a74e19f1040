package manager

import (
	"context"
	"errors"
	"fmt"
	"os"

	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/handover"
	"github.com/gosanlock/gosanlock/paxos"
	"github.com/gosanlock/gosanlock/wdmd/wdmdclient"
	"github.com/gosanlock/gosanlock/wire"
)

// The new image's side of a handover, for the leases (docs/upgrade.md
// "Adopting lockspaces"); manager/handover.go is the old image's. The
// old image pauses every renewal before it takes its final state
// (PauseRenewals, undone by ResumeRenewals if the handover fails); the
// new image builds the lockspaces from that state without any I/O
// (PrepareAdoption) and starts their renewals and main loops only once
// it has taken over (Adoption.Start).

// PauseRenewals holds the renewals of every joined lockspace (a renewal
// in flight ends first). While paused a lockspace neither renews nor
// releases its lease. It fails, with every renewal running again, if one
// does not pause before ctx ends.
func (m *Manager) PauseRenewals(ctx context.Context) error {
	ls := m.Lockspaces
	var paused []*delta.Lockspace
	for _, run := range ls.runners() {
		if err := run.Pause(ctx); err != nil {
			for _, p := range paused {
				p.Unpause()
			}
			return err
		}
		paused = append(paused, run)
	}
	return nil
}

// ResumeRenewals undoes PauseRenewals (a renewal that came due meanwhile
// runs at once). It is harmless when nothing is paused.
func (m *Manager) ResumeRenewals() {
	for _, run := range m.Lockspaces.runners() {
		run.Unpause()
	}
}

// runners lists the runner of every lockspace in any list.
func (m *Lockspaces) runners() []*delta.Lockspace {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*delta.Lockspace
	for _, l := range m.lists {
		for _, sp := range l {
			if sp.run != nil {
				out = append(out, sp.run)
			}
		}
	}
	return out
}

// MaxIOTimeout is the largest io_timeout of the lockspaces on any list,
// in seconds (0 with none): the I/O deadline of every lease I/O made in
// them (the quiesce bound of a handover, docs/upgrade.md "Pending requests").
func (m *Lockspaces) MaxIOTimeout() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	io := 0
	for _, l := range m.lists {
		for _, sp := range l {
			io = max(io, sp.ioTimeoutNow())
		}
	}
	return io
}

// Adoption is the lease state of a handover, built and checked but not
// started.
type Adoption struct {
	m        *Manager
	listener func(*os.File) (Listener, error)
	spaces   []adoptedSpace
	res      []*adoptedRes
}

// adoptedRes is one resource held by tokens of registered clients, or an
// orphan, checked and with its disks open.
type adoptedRes struct {
	key     resKey
	lease   handover.Lease // the first token's or the orphan's
	hold    paxos.HeldState
	orphan  bool
	pid     int // EX holder or the orphan's pid; 0 for SH
	tokens  []adoptedTok
	devs    []diskfmt.Device
	pdisks  []paxos.Disk
	disks   []wire.Disk
	hostID  uint64
	hostGen uint64
	started bool
}

type adoptedTok struct {
	client ClientID
	pid    int
	lease  handover.Lease
}

type adoptedSpace struct {
	sp  *space
	run *delta.Lockspace
	dev diskfmt.Device
	rs  delta.RenewalState
}

// errNoRenewalState: the lockspace comes without the record to renew from
// (a format 1 state, or a snapshot taken while serving).
var errNoRenewalState = errors.New("no renewal state (delta lease record)")

// PrepareAdoption builds the lockspaces of a final handover state: for
// each, its disk opened, a runner configured as a join would, the
// handed-over record decoded and checked (our host_id, the generation
// and timestamp the state names, a last success neither in the future
// nor so old that the lease is failing). It writes and reads nothing.
// Call it after Start; on error nothing is left open.
//
// clients[i] is the client of the adopted connection of st.Clients[i] (0
// when it is not registered); every token is bound to its client's.
//
// files is the state's fd table (the wdmd sessions' and the event
// listeners' connections); listener wraps an event listener's file (nil:
// a state with listeners is refused).
func (m *Manager) PrepareAdoption(st *handover.State, clients []ClientID, files []*os.File,
	listener func(*os.File) (Listener, error)) (*Adoption, error) {
	a := &Adoption{m: m, listener: listener}
	ok := false
	defer func() {
		if !ok {
			a.Abort()
		}
	}()
	ls := m.Lockspaces
	cfg := ls.conf()
	for i := range st.Lockspaces {
		h := &st.Lockspaces[i]
		if err := a.prepareSpace(ls, cfg, h, files); err != nil {
			return nil, fmt.Errorf("lockspace %s: %w", h.Name, err)
		}
	}
	if err := a.prepareResources(st, clients); err != nil {
		return nil, err
	}
	ok = true
	return a, nil
}

// prepareSpace builds one handed-over lockspace (PrepareAdoption): the
// state checked, the entry reserved, the disk opened, the wdmd session
// and the event listeners adopted, and a runner made that continues from
// the handed-over record. On error nothing of it is left open.
func (a *Adoption) prepareSpace(ls *Lockspaces, cfg *Settings, h *handover.Lockspace, files []*os.File) (err error) {
	if err := checkHandedSpace(h, files, a.listener != nil); err != nil {
		return err
	}
	g, ld, err := handedRecord(h, clock.Monotime(ls.cfg.Clock))
	if err != nil {
		return err
	}
	sp, err := ls.reserveAdopted(h, a.spaces)
	if err != nil {
		return err
	}
	var dev diskfmt.Device
	var wd *wdmdclient.Session
	defer func() {
		if err == nil {
			return
		}
		for _, x := range sp.listeners {
			_ = x.Close() // our copy only
		}
		sp.listeners = nil
		sp.cancel()
		if dev != nil {
			_ = dev.Close()
		}
		if wd != nil {
			_ = wd.Close() // our duplicate only: the old image keeps its own
		}
	}()
	if dev, err = ls.cfg.Open(h.Path); err != nil {
		return fmt.Errorf("open %s: %w", sp.disk(), err)
	}
	if w := h.Wdmd; w != nil {
		// The same connection to wdmd: it never closes, so the expiry
		// wdmd holds for us never lapses (docs/upgrade.md "Adopting wdmd sessions").
		if wd, err = wdmdclient.AdoptSession(files[w.FD], w.Name, w.Active); err != nil {
			return err
		}
	}
	run, err := ls.adoptedRunner(cfg, sp, h, g, dev, wd)
	if err != nil {
		return err
	}
	rs, err := renewalStateIn(h, ld)
	if err == nil {
		err = run.CheckAdopt(rs)
	}
	if err != nil {
		return err
	}
	rs.History = historyIn(h.History)
	sp.run = run
	if wd != nil {
		sp.wd, sp.wdActive = wd, h.Wdmd.Active
	}
	if err := a.adoptListeners(sp, h, files); err != nil {
		return err
	}
	a.spaces = append(a.spaces, adoptedSpace{sp: sp, run: run, dev: dev, rs: rs})
	return nil
}

// checkHandedSpace checks what a lockspace of the state needs besides its
// record: its connections in the fd table, not being removed, and a
// renewal record to continue from. canListen: this image can adopt event
// listeners.
func checkHandedSpace(h *handover.Lockspace, files []*os.File, canListen bool) error {
	inTable := func(fd int) bool { return fd >= 0 && fd < len(files) && files[fd] != nil }
	switch {
	case h.Wdmd != nil && !inTable(h.Wdmd.FD):
		return errors.New("wdmd session without its connection")
	case h.Removing || h.SpaceDead:
		return errors.New("being removed")
	case len(h.Leader.Raw) != diskfmt.LeaderSize:
		return errNoRenewalState
	case len(h.EventListeners) > 0 && !canListen:
		return errors.New("this image cannot adopt event listeners")
	}
	for _, fd := range h.EventListeners {
		if !inTable(fd) {
			return errors.New("event listener without its connection")
		}
	}
	return nil
}

// handedRecord decodes the lockspace's delta lease record and its sizes,
// and checks that the record is the one the state names and that the
// lease, at monotime now, is not yet failing.
func handedRecord(h *handover.Lockspace, now uint64) (diskfmt.Geometry, diskfmt.Leader, error) {
	g, ok := diskfmt.LookupGeometry(int(h.SectorSize), int(h.AlignSize))
	if !ok {
		return g, diskfmt.Leader{}, fmt.Errorf("sizes %d/%d", h.SectorSize, h.AlignSize)
	}
	ld, err := diskfmt.DecodeLeader(h.Leader.Raw)
	if err != nil {
		return g, ld, fmt.Errorf("delta lease record: %w", err)
	}
	if ld.OwnerGeneration != h.Generation || ld.Timestamp != h.Timestamp {
		return g, ld, fmt.Errorf("record generation %d timestamp %d, state says %d %d", ld.OwnerGeneration,
			ld.Timestamp, h.Generation, h.Timestamp)
	}
	if fail := uint64(delta.IDRenewalFailSeconds(int(h.IOTimeout))); h.Timestamp+fail <= now {
		return g, ld, fmt.Errorf("last renewal %d is %d s old (renewals fail after %d s)", h.Timestamp, now-h.Timestamp, fail)
	}
	return g, ld, nil
}

// reserveAdopted makes the entry of a handed-over lockspace, joined but
// on no list until Adoption.Start. A lockspace of that name or disk may
// be neither present nor already in this adoption.
func (m *Lockspaces) reserveAdopted(h *handover.Lockspace, adopted []adoptedSpace) (*space, error) {
	ident := wire.Lockspace{Name: h.Name, HostID: h.HostID, Disk: wire.Disk{Path: h.Path, Offset: h.Offset}}
	m.mu.Lock()
	for _, l := range m.lists {
		for _, sp := range l {
			if sp.ls.Name == ident.Name || sameDisk(&sp.ls, &ident) {
				m.mu.Unlock()
				return nil, errors.New("already present")
			}
		}
	}
	for _, x := range adopted {
		if x.sp.ls.Name == ident.Name || sameDisk(&x.sp.ls, &ident) {
			m.mu.Unlock()
			return nil, errors.New("handed over twice")
		}
	}
	m.lastID++
	sp := &space{m: m, id: m.lastID, ls: ident, addDone: make(chan struct{}),
		gone: make(chan struct{}), kills: make(map[int]*killState), list: listSpaces,
		externalUsed: h.ExternalUsed, usedByOrphans: h.UsedByOrphans, usedRetries: h.UsedRetries,
		wake: make(chan struct{}, 1)}
	sp.ioTimeout.Store(int32(h.IOTimeout))
	m.mu.Unlock()
	sp.ctx, sp.cancel = context.WithCancel(m.baseContext())
	close(sp.addDone)
	return sp, nil
}

// adoptedRunner configures the runner of a handed-over lockspace as a
// join would, on dev with sizes g; with a wdmd session, each renewal
// moves its expiry.
func (m *Lockspaces) adoptedRunner(cfg *Settings, sp *space, h *handover.Lockspace, g diskfmt.Geometry,
	dev diskfmt.Device, wd *wdmdclient.Session) (*delta.Lockspace, error) {
	hist := cfg.RenewalHistorySize
	if hist <= 0 {
		hist = -1
	}
	var run *delta.Lockspace
	dcfg := delta.Config{
		Dev: dev, Offset: int64(h.Offset), Space: h.Name, HostID: h.HostID, Geometry: g,
		HostName: m.hostName(), IOTimeout: int(h.IOTimeout), WatchdogFireTimeout: cfg.WatchdogFireTimeout,
		SetBitmapSeconds: cfg.SetBitmapSeconds, HistorySize: hist, Clock: m.cfg.Clock, Log: sp.deltaLog(),
		DebugRenew: cfg.DebugRenew, OnRenewal: sp.onRenewal(m.renewalHook(h.Name)),
	}
	if wd != nil {
		dcfg.OnRenewed = func(ts uint64) {
			// As after a join, the expiry follows the own io_timeout.
			failSecs := uint64(delta.IDRenewalFailSeconds(run.Timing().IOTimeout))
			if err := wd.Renewed(ts, ts+failSecs); err != nil {
				// As after a join: wdmd is gone, stop renewing (docs/wdmd.md "wdmd crash").
				m.lg().Error(fmt.Sprintf("s%d wdmd_test_live %d failed %s: renewals stopped, lockspace %s",
					sp.id, ts, causeLog(err, 0), sp.ls.Name))
				run.Halt()
			}
		}
	}
	var err error
	run, err = delta.New(dcfg)
	return run, err
}

// renewalStateIn is the record a runner continues from: the handed-over
// delta lease record ld, its last successes and host table.
func renewalStateIn(h *handover.Lockspace, ld diskfmt.Leader) (delta.RenewalState, error) {
	rs := delta.RenewalState{Leader: ld, LastSuccess: h.Timestamp, AcquireLastSuccess: h.AcquireLastSuccess}
	var err error
	rs.Hosts, err = hostTableIn(h.HostTable)
	return rs, err
}

// historyIn is the inverse of renewalsOut.
func historyIn(in []handover.Renewal) []delta.HistoryEntry {
	var out []delta.HistoryEntry
	for _, e := range in {
		out = append(out, delta.HistoryEntry{Timestamp: e.Timestamp, ReadMs: e.ReadMs,
			WriteMs: e.WriteMs, NextTimeouts: e.NextTimeouts, NextErrors: e.NextErrors})
	}
	return out
}

// adoptListeners adds our copies of the lockspace's event listeners (the
// same connections) to sp before anything can send on them: sp is on no
// list until Adoption.Start.
func (a *Adoption) adoptListeners(sp *space, h *handover.Lockspace, files []*os.File) error {
	for _, fd := range h.EventListeners {
		l, err := a.listener(files[fd])
		if err != nil {
			return fmt.Errorf("event listener: %w", err)
		}
		sp.listeners = append(sp.listeners, l)
	}
	return nil
}

// prepareResources groups the tokens by resource, checks each hold
// against its lockspace as handed over (an exclusive hold's leader names
// our host_id and generation) and opens the disks.
func (a *Adoption) prepareResources(st *handover.State, clients []ClientID) error {
	spaces := map[string]*handover.Lockspace{}
	for i := range st.Lockspaces {
		spaces[st.Lockspaces[i].Name] = &st.Lockspaces[i]
	}
	byKey := map[resKey]*adoptedRes{}
	add := func(l *handover.Lease, orphan bool, pid int) (*adoptedRes, error) {
		key := resKey{l.Lockspace, l.Resource}
		what := fmt.Sprintf("resource %s:%s", key.space, key.name)
		hs, err := holdIn(l)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		sp := spaces[key.space]
		if sp == nil {
			return nil, fmt.Errorf("%s: lockspace not handed over", what)
		}
		if hs.Shared != (l.Mode == handover.ModeSH) {
			return nil, fmt.Errorf("%s: mode %v, hold shared %v", what, l.Mode, hs.Shared)
		}
		ld := &hs.Leader
		switch {
		case ld.Magic != diskfmt.PaxosMagic:
			return nil, fmt.Errorf("%s: leader magic %#x", what, ld.Magic)
		case diskfmt.NameString(ld.SpaceName[:]) != key.space || diskfmt.NameString(ld.ResourceName[:]) != key.name:
			return nil, fmt.Errorf("%s: leader of another resource", what)
		case !hs.Shared && (ld.OwnerID != sp.HostID || ld.OwnerGeneration != sp.Generation):
			return nil, fmt.Errorf("%s: leader owned by %d/%d, not %d/%d", what, ld.OwnerID, ld.OwnerGeneration,
				sp.HostID, sp.Generation)
		case !hs.Shared && l.Lver != ld.Lver:
			return nil, fmt.Errorf("%s: lver %d, leader %d", what, l.Lver, ld.Lver)
		}
		if r := byKey[key]; r != nil {
			if orphan || r.orphan || !hs.Shared || !r.hold.Shared {
				return nil, fmt.Errorf("%s: held twice", what)
			}
			return r, nil
		}
		r := &adoptedRes{key: key, lease: *l, hold: hs, orphan: orphan, hostID: sp.HostID, hostGen: sp.Generation}
		if !hs.Shared {
			r.pid = pid
		}
		for _, d := range l.Disks {
			r.disks = append(r.disks, wire.Disk{Path: d.Path, Offset: d.Offset})
		}
		devs, pd, err := a.m.Resources.openResDisks(r.disks)
		if err != nil {
			return nil, fmt.Errorf("%s: cannot open its disks: %w", what, err)
		}
		r.devs, r.pdisks = devs, pd
		byKey[key] = r
		a.res = append(a.res, r)
		return r, nil
	}
	for i := range st.Tokens {
		tk := &st.Tokens[i]
		if tk.Client < 0 || tk.Client >= len(clients) || clients[tk.Client] == 0 {
			return fmt.Errorf("token %s:%s: client %d not adopted", tk.Lockspace, tk.Resource, tk.Client)
		}
		r, err := add(&tk.Lease, false, tk.Pid)
		if err != nil {
			return err
		}
		r.tokens = append(r.tokens, adoptedTok{client: clients[tk.Client], pid: tk.Pid, lease: tk.Lease})
	}
	for i := range st.Orphans {
		o := &st.Orphans[i]
		r, err := add(&o.Lease, true, o.Pid)
		if err != nil {
			return err
		}
		r.pid = o.Pid
	}
	return nil
}

// startResources binds the adopted resources to the running lockspaces
// (their paxos membership) and to the clients' lease sets.
func (a *Adoption) startResources() {
	rs := a.m.Resources
	for _, x := range a.res {
		host, herr := rs.spaceHost(x.key.space)
		var held *paxos.Held
		var err error
		if herr == nil {
			lease := &paxos.Lease{Host: host, Name: x.key.name, Disks: x.pdisks}
			held, err = lease.Adopt(x.hold)
		} else {
			err = fmt.Errorf("lockspace %s: %w", x.key.space, herr)
		}
		if err != nil {
			// Not reachable: PrepareAdoption checked the same. The lease
			// stays on disk, unrenewed by nobody: log it loudly.
			rs.lg().Error(fmt.Sprintf("adopt %s:%s failed: %s", x.key.space, x.key.name, err))
			closeDevs(x.devs)
			continue
		}
		rs.mu.Lock()
		rs.lastResID++
		r := &resource{key: x.key, id: rs.lastResID, list: resHeld, shared: x.hold.Shared, host: host,
			disks: x.disks, restrict: x.lease.Restrict, killpath: x.lease.KillPath, killargs: x.lease.KillArgs,
			pid: x.pid, held: held, devs: x.devs}
		if x.orphan {
			r.list = resOrphan
		}
		for _, at := range x.tokens {
			rs.lastTokID++
			tk := &token{id: rs.lastTokID, r: r, client: at.client, pid: at.pid, flags: at.lease.Flags,
				res: wire.Resource{LockspaceName: x.key.space, Name: x.key.name, Flags: at.lease.ResFlags,
					Disks: x.disks}}
			if !x.hold.Shared {
				tk.lver = at.lease.Lver
			}
			r.tokens = append(r.tokens, tk)
			lc := rs.leases[at.client]
			if lc == nil {
				lc = &leaseClient{id: at.client}
				rs.leases[at.client] = lc
			}
			lc.tokens = append(lc.tokens, tk)
		}
		rs.res[x.key] = r
		rs.mu.Unlock()
		x.started = true
		rs.rlog(r).Info("adopted", spaceField(x.key.space), zap.String("resource", x.key.name),
			zap.Stringer("mode", x.lease.Mode), zap.Uint64("lver", x.hold.Leader.Lver),
			zap.Int("tokens", len(r.tokens)), zap.Int("orphan", b2i(x.orphan)))
	}
}

// Abort drops an adoption that is not started: disks closed.
func (a *Adoption) Abort() {
	for _, x := range a.res {
		if !x.started {
			closeDevs(x.devs)
		}
	}
	a.res = nil
	for _, x := range a.spaces {
		x.sp.cancel()
		_ = x.dev.Close()
		if x.sp.wd != nil {
			_ = x.sp.wd.Close() // our duplicate: wdmd sees nothing
		}
		for _, l := range x.sp.listeners {
			_ = l.Close() // our copy: the listener sees nothing
		}
		x.sp.listeners = nil
	}
	a.spaces = nil
}

// Start puts the adopted lockspaces on the spaces list and starts their
// renewals (the next one due at the handed-over last success +
// id_renewal_seconds) and main loops. Call it once, after the handover.
func (a *Adoption) Start() {
	ls := a.m.Lockspaces
	for _, x := range a.spaces {
		sp, run, dev, res := x.sp, x.run, x.dev, x.rs
		ls.mu.Lock()
		ls.lists[listSpaces] = append([]*space{sp}, ls.lists[listSpaces]...)
		ls.wg.Add(2)
		ls.mu.Unlock()
		ls.lg().Warn(fmt.Sprintf("s%d lockspace %s adopted generation %d last_success %d", sp.id,
			wire.LockspaceString(&sp.ls), res.Leader.OwnerGeneration, res.LastSuccess))
		go func() {
			defer ls.wg.Done()
			err := run.RunAdopted(sp.ctx, res)
			st := run.Status()
			if err != nil && !errors.Is(err, context.Canceled) {
				sp.log().Info("lockspace runner stopped", zap.Int("released", b2i(st.Released)), spaceField(sp.ls.Name),
					zap.String("disk", sp.disk()), causeField(err, sp.ioTimeoutNow()))
			} else {
				sp.log().Info("lockspace runner stopped", zap.Int("released", b2i(st.Released)))
			}
			_ = dev.Close()
			if wd := sp.wd; wd != nil {
				_ = wd.Close()
			}
		}()
		go func() {
			defer ls.wg.Done()
			<-run.Joined()
			sp.monitor()
			sp.stop()
		}()
	}
	for _, x := range a.spaces {
		<-x.run.Joined() // the status (generation) the paxos membership is built from
	}
	a.spaces = nil
	a.startResources()
	a.res = nil
}
