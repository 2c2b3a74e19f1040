package handover

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Bounds a valid state stays within. They are generous; they exist so
// that a corrupt or hostile state cannot make the new image allocate or
// loop without bound.
const (
	MaxFDs         = 1 << 16
	MaxClients     = 1 << 16
	MaxLockspaces  = 1 << 12
	MaxTokens      = 1 << 20
	MaxDisks       = 16
	MaxHistory     = 1 << 12
	MaxHostID      = 2000
	MaxEvents      = 1 << 10
	MaxListeners   = 32 // REG_EVENT connections per lockspace
	MaxNameLen     = 48
	MaxPathLen     = 1024
	MaxTextLen     = 4096
	MaxConfigItems = 1 << 10
)

// Validate checks the invariants the new image relies on: fd indexes in
// range and used once, references that resolve, bounded sizes, names and
// paths of the right length, and no two holders of one exclusive lease.
func (s *State) Validate() error {
	v := validator{s: s}
	v.check()
	if v.err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, v.err)
	}
	return nil
}

type validator struct {
	s      *State
	err    error
	fdUsed []bool
}

func (v *validator) fail(format string, args ...any) {
	if v.err == nil {
		v.err = fmt.Errorf(format, args...)
	}
}

func (v *validator) fd(what string, i int) {
	if i < 0 || i >= len(v.fdUsed) {
		v.fail("%s: fd index %d out of range [0,%d)", what, i, len(v.fdUsed))
		return
	}
	if v.fdUsed[i] {
		v.fail("%s: fd index %d used twice", what, i)
		return
	}
	v.fdUsed[i] = true
}

func (v *validator) text(what, s string, min, max int) {
	switch {
	case len(s) < min:
		v.fail("%s: empty", what)
	case len(s) > max:
		v.fail("%s: %d bytes (max %d)", what, len(s), max)
	case !utf8.ValidString(s):
		v.fail("%s: not valid UTF-8", what)
	case strings.IndexByte(s, 0) >= 0:
		v.fail("%s: contains NUL", what)
	}
}

func (v *validator) count(what string, n, max int) bool {
	if n > max {
		v.fail("%d %s (max %d)", n, what, max)
		return false
	}
	return true
}

func (v *validator) check() {
	s := v.s
	if s.NumFDs < 1 || s.NumFDs > MaxFDs {
		v.fail("NumFDs %d out of range [1,%d]", s.NumFDs, MaxFDs)
		return
	}
	if !v.count("clients", len(s.Clients), MaxClients) ||
		!v.count("lockspaces", len(s.Lockspaces), MaxLockspaces) ||
		!v.count("tokens", len(s.Tokens), MaxTokens) ||
		!v.count("orphans", len(s.Orphans), MaxTokens) ||
		!v.count("config values", len(s.Config.Values), MaxConfigItems) ||
		!v.count("config args", len(s.Config.Args), MaxConfigItems) {
		return
	}
	v.fdUsed = make([]bool, s.NumFDs)
	v.text("OldVersion", s.OldVersion, 0, MaxTextLen)
	v.text("BootID", s.BootID, 0, 64)
	v.config(&s.Config)
	v.fd("listener", s.Listener.FD)
	if s.PidFile.FD != -1 {
		v.fd("pid file", s.PidFile.FD)
	}
	v.text("pid file path", s.PidFile.Path, 0, MaxPathLen)
	v.text("listener path", s.Listener.Path, 0, MaxPathLen)

	spaces := make(map[string]*Lockspace, len(s.Lockspaces))
	for i := range s.Lockspaces {
		ls := &s.Lockspaces[i]
		v.lockspace(i, ls)
		if spaces[ls.Name] != nil {
			v.fail("lockspace %q joined twice", ls.Name)
		}
		spaces[ls.Name] = ls
	}
	slots := make(map[int]bool, len(s.Clients))
	for i := range s.Clients {
		c := &s.Clients[i]
		what := fmt.Sprintf("client %d", i)
		v.fd(what, c.FD)
		if c.Slot < 0 || slots[c.Slot] {
			v.fail("%s: slot %d negative or used twice", what, c.Slot)
		}
		slots[c.Slot] = true
		if c.Registered != (c.Pid > 0) {
			v.fail("%s: registered=%v with pid %d", what, c.Registered, c.Pid)
		}
		if !c.Registered && c.Pid != -1 {
			v.fail("%s: unregistered with pid %d (want -1)", what, c.Pid)
		}
		if n := len(c.Pending); n != 0 && (n < 32 || n > MaxPendingLen) {
			v.fail("%s: pending request of %d bytes (32..%d)", what, n, MaxPendingLen)
		}
		v.text(what+" name", c.Name, 0, MaxTextLen)
		v.text(what+" killpath", c.KillPath, 0, MaxPathLen)
		v.text(what+" killargs", c.KillArgs, 0, MaxTextLen)
		if c.EventLockspace != "" && spaces[c.EventLockspace] == nil {
			v.fail("%s: events of lockspace %q, which is not joined", what, c.EventLockspace)
		}
		if c.EventLockspace == "" && len(c.PendingEvents) > 0 {
			v.fail("%s: pending events without an event registration", what)
		}
		v.count(what+" pending events", len(c.PendingEvents), MaxEvents)
	}

	// Exclusive leases: one holder (token or orphan) per resource, and a
	// resource is held in one mode only.
	modes := make(map[[2]string]Mode, len(s.Tokens)+len(s.Orphans))
	hold := func(what string, l *Lease) {
		v.lease(what, l, spaces)
		k := [2]string{l.Lockspace, l.Resource}
		if m, ok := modes[k]; ok && (m == ModeEX || l.Mode == ModeEX) {
			v.fail("%s: resource %s:%s held %v and %v", what, l.Lockspace, l.Resource, m, l.Mode)
		}
		modes[k] = l.Mode
	}
	for i := range s.Tokens {
		t := &s.Tokens[i]
		what := fmt.Sprintf("token %d", i)
		hold(what, &t.Lease)
		if t.Client < 0 || t.Client >= len(s.Clients) {
			v.fail("%s: client index %d out of range [0,%d)", what, t.Client, len(s.Clients))
		} else if c := &s.Clients[t.Client]; !c.Registered || c.Pid != t.Pid {
			v.fail("%s: client %d (registered=%v pid %d) does not hold for pid %d", what, t.Client, c.Registered, c.Pid, t.Pid)
		}
	}
	for i := range s.Orphans {
		o := &s.Orphans[i]
		what := fmt.Sprintf("orphan %d", i)
		hold(what, &o.Lease)
		// An EX orphan names the pid that held it; an SH one has none
		// (pid 0: the daemon keeps no holder pid for a shared lease).
		if o.Pid < 0 || (o.Pid == 0 && o.Mode != ModeSH) {
			v.fail("%s: %v with pid %d", what, o.Mode, o.Pid)
		}
	}
}

func (v *validator) config(c *Config) {
	for i, a := range c.Args {
		v.text(fmt.Sprintf("config arg %d", i), a, 0, MaxTextLen)
	}
	v.text("config file", c.ConfigFile, 0, MaxPathLen)
	v.text("run dir", c.RunDir, 0, MaxPathLen)
	v.text("socket path", c.SocketPath, 0, MaxPathLen)
	v.text("pid file", c.PidFile, 0, MaxPathLen)
	v.text("wdmd socket", c.WdmdSocket, 0, MaxPathLen)
	v.text("host name", c.HostName, 0, MaxTextLen)
	for k, val := range c.Values {
		v.text("config key", k, 1, MaxNameLen*2)
		v.text("config value "+k, val, 0, MaxTextLen)
	}
}

func (v *validator) lockspace(i int, ls *Lockspace) {
	what := fmt.Sprintf("lockspace %d", i)
	v.text(what+" name", ls.Name, 1, MaxNameLen)
	v.text(what+" path", ls.Path, 1, MaxPathLen)
	if ls.HostID < 1 || ls.HostID > MaxHostID {
		v.fail("%s: host_id %d out of range [1,%d]", what, ls.HostID, MaxHostID)
	}
	if ls.IOTimeout < 1 || ls.IOTimeout > 0xffff {
		v.fail("%s: io_timeout %d", what, ls.IOTimeout)
	}
	if ls.SectorSize != 512 && ls.SectorSize != 4096 {
		v.fail("%s: sector size %d", what, ls.SectorSize)
	}
	switch ls.AlignSize {
	case 1 << 20, 2 << 20, 4 << 20, 8 << 20:
	default:
		v.fail("%s: align size %d", what, ls.AlignSize)
	}
	if ls.LastRenewalAgo < 0 {
		v.fail("%s: last renewal in the future (%v)", what, ls.LastRenewalAgo)
	}
	v.text(what+" leader space name", ls.Leader.SpaceName, 0, MaxNameLen)
	v.text(what+" leader resource name", ls.Leader.ResourceName, 0, MaxNameLen)
	v.raw(what, &ls.Leader)
	v.count(what+" history entries", len(ls.History), MaxHistory)
	if v.count(what+" hosts", len(ls.Hosts), MaxHostID) {
		for j := range ls.Hosts {
			h := &ls.Hosts[j]
			if h.HostID < 1 || h.HostID > MaxHostID {
				v.fail("%s host %d: host_id %d", what, j, h.HostID)
			}
			v.text(what+" host owner name", h.OwnerName, 0, MaxNameLen)
		}
	}
	if ht := ls.HostTable; ht != nil {
		if ht.FirstCheck == 0 || ht.FirstCheck > ht.LastCheck {
			v.fail("%s host table: checks %d..%d", what, ht.FirstCheck, ht.LastCheck)
		}
		if ht.Checked < 0 || ht.Checked > MaxHostID {
			v.fail("%s host table: %d checked", what, ht.Checked)
		}
		if v.count(what+" host table entries", len(ht.Hosts), MaxHostID) {
			for j := range ht.Hosts {
				h := &ht.Hosts[j]
				if h.HostID != uint64(j+1) {
					v.fail("%s host table entry %d: host_id %d", what, j, h.HostID)
				}
				for _, t := range []uint64{h.LastCheck, h.LastLive, h.LastReq} {
					if t != 0 && (t < ht.FirstCheck || t > ht.LastCheck) {
						v.fail("%s host table host_id %d: time %d outside %d..%d", what, h.HostID, t, ht.FirstCheck, ht.LastCheck)
					}
				}
				if h.LeaseBad < 0 {
					v.fail("%s host table host_id %d: lease_bad %d", what, h.HostID, h.LeaseBad)
				}
				v.text(what+" host table owner name", h.OwnerName, 0, MaxNameLen)
			}
		}
		if r := ht.Staged; r != nil {
			if r.Count < 0 || r.Count > MaxHostID || len(r.Records) > r.Count {
				v.fail("%s staged read: %d records of %d", what, len(r.Records), r.Count)
			}
			prev := uint64(0)
			for _, x := range r.Records {
				if x.HostID <= prev || x.HostID > uint64(r.Count) || len(x.Raw) != LeaderSize {
					v.fail("%s staged read: host_id %d after %d, %d bytes", what, x.HostID, prev, len(x.Raw))
				}
				prev = x.HostID
			}
		}
	}
	if v.count(what+" event listeners", len(ls.EventListeners), MaxListeners) {
		for _, fd := range ls.EventListeners {
			v.fd(what+" event listener", fd)
		}
	}
	if ls.Wdmd != nil {
		v.fd(what+" wdmd", ls.Wdmd.FD)
		v.text(what+" wdmd name", ls.Wdmd.Name, 0, MaxNameLen*2)
	}
}

func (v *validator) lease(what string, l *Lease, spaces map[string]*Lockspace) {
	v.text(what+" lockspace", l.Lockspace, 1, MaxNameLen)
	v.text(what+" resource", l.Resource, 1, MaxNameLen)
	if spaces[l.Lockspace] == nil {
		v.fail("%s: lockspace %q is not joined", what, l.Lockspace)
	}
	if l.Mode != ModeEX && l.Mode != ModeSH {
		v.fail("%s: mode %d", what, l.Mode)
	}
	if len(l.Disks) < 1 || len(l.Disks) > MaxDisks {
		v.fail("%s: %d disks (want 1..%d)", what, len(l.Disks), MaxDisks)
	}
	for _, d := range l.Disks {
		v.text(what+" disk path", d.Path, 1, MaxPathLen)
	}
	v.text(what+" leader space name", l.Leader.SpaceName, 0, MaxNameLen)
	v.text(what+" leader resource name", l.Leader.ResourceName, 0, MaxNameLen)
	v.raw(what, &l.Leader)
	if h := l.Hold; h != nil {
		if h.SectorSize != 512 && h.SectorSize != 4096 {
			v.fail("%s: hold sector size %d", what, h.SectorSize)
		}
		switch h.AlignSize {
		case 1 << 20, 2 << 20, 4 << 20, 8 << 20:
		default:
			v.fail("%s: hold align size %d", what, h.AlignSize)
		}
		if len(h.LVB) > 4096 || (!h.HasLVB && len(h.LVB) > 0) {
			v.fail("%s: lvb of %d bytes", what, len(h.LVB))
		}
	}
	v.text(what+" killpath", l.KillPath, 0, MaxPathLen)
	v.text(what+" killargs", l.KillArgs, 0, MaxTextLen)
}

// raw checks a leader's encoded record: absent or LeaderSize bytes.
func (v *validator) raw(what string, l *Leader) {
	if n := len(l.Raw); n != 0 && n != LeaderSize {
		v.fail("%s: leader record of %d bytes (want %d)", what, n, LeaderSize)
	}
}

// fdRefs returns a pointer to every fd index field, listener first.
func (s *State) fdRefs() []*int {
	refs := []*int{&s.Listener.FD}
	if s.PidFile.FD != -1 {
		refs = append(refs, &s.PidFile.FD)
	}
	for i := range s.Clients {
		refs = append(refs, &s.Clients[i].FD)
	}
	for i := range s.Lockspaces {
		if w := s.Lockspaces[i].Wdmd; w != nil {
			refs = append(refs, &w.FD)
		}
		for j := range s.Lockspaces[i].EventListeners {
			refs = append(refs, &s.Lockspaces[i].EventListeners[j])
		}
	}
	return refs
}
