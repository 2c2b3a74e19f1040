package manager

import (
	"fmt"
	"time"

	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// StatusRecords returns the LOCKSPACE records of joined,
// then being added, then being removed lockspaces (docs/protocol.md "Commands" #5, "Record texts").
func (m *Lockspaces) StatusRecords() []wire.StateRecord {
	m.mu.Lock()
	var all []*space
	for _, l := range []list{listSpaces, listAdd, listRem} {
		all = append(all, m.lists[l]...)
	}
	type snap struct {
		sp              *space
		list            list
		run             *delta.Lockspace
		end             ending
		retries         uint32
		used, byOrphans bool
	}
	snaps := make([]snap, len(all))
	for i, sp := range all {
		snaps[i] = snap{sp, sp.list, sp.run, sp.end, sp.usedRetries, sp.externalUsed, sp.usedByOrphans}
	}
	m.mu.Unlock()

	cfg := m.conf()
	recs := make([]wire.StateRecord, 0, len(snaps))
	for _, s := range snaps {
		var st delta.Status
		if s.run != nil {
			st = s.run.Status()
		}
		extend := s.sp.ioTimeoutNow()
		if cfg.RenewalReadExtendSet {
			extend = cfg.RenewalReadExtendSec
		}
		// 5.1.1's key list (docs/protocol.md "Record texts"); version is
		// the version of our delta lease (0 until joined), no_timeout
		// whether it carries NO_TIMEOUT; the NO_WATCHDOG and CAW keys
		// show 0: no lockspace of ours has them.
		text := fmt.Sprintf("list=%s space_id=%d version=0x%08x io_timeout=%d sector_size=%d align_size=%d host_generation=%d "+
			"renew_fail=%d space_dead=%d killing_pids=%d used_retries=%d external_used=%d used_by_orphans=%d "+
			"no_timeout=%d no_watchdog=%d caw=%d caw_dev=%d:%d caw_off=%d "+
			"renewal_read_extend_sec=%d set_max_sectors_kb=%d corrupt_result=%d acquire_last_result=%d "+
			"renewal_last_result=%d acquire_last_attempt=%d acquire_last_success=%d renewal_last_attempt=%d "+
			"renewal_last_success=%d",
			s.list, s.sp.id, st.Version, s.sp.ioTimeoutNow(), st.SectorSize, st.AlignSize, st.HostGeneration,
			b2i(st.RenewFail), b2i(s.end.dead()), s.end.killingPids(), s.retries, b2i(s.used), b2i(s.byOrphans),
			b2i(st.NoTimeout), 0, 0, 0, 0, 0,
			extend, 0, int(st.CorruptResult), int(st.AcquireLastResult),
			int(st.RenewalLastResult), st.AcquireLastAttempt, st.AcquireLastSuccess, st.RenewalLastAttempt,
			st.RenewalLastSuccess)
		ls := s.sp.ls
		ls.Disk.Pad1 = uint32(st.SectorSize)
		recs = append(recs, wire.StateRecord{
			State:     wire.State{Type: wire.StateLockspace, Data64: ls.HostID, Name: ls.Name},
			Text:      text,
			Lockspace: &ls,
		})
	}
	return recs
}

// HostStatus returns the HOST records of lockspace name (docs/protocol.md
// "Commands" #15, "Record texts"), looked up on all three lists; -ENOSPC
// when there is none.
func (m *Lockspaces) HostStatus(name string) ([]wire.StateRecord, error) {
	m.mu.Lock()
	sp := m.anyByName(name)
	var run *delta.Lockspace
	if sp != nil {
		run = sp.run
	}
	m.mu.Unlock()
	if sp == nil {
		return nil, causeErr(rescode.ErrENOSPC, "no lockspace "+name)
	}
	if run == nil {
		return nil, nil
	}
	var recs []wire.StateRecord
	for _, h := range run.HostStatuses() {
		st := run.HostState(h.HostID)
		recs = append(recs, wire.StateRecord{
			State: wire.State{Type: wire.StateHost, Data32: uint32(h.HostID), Data64: h.Timestamp},
			Text:  hostStatusText(&h, delta.HostInfo{State: st, DeadExt: h.DeadExt()}),
		})
	}
	return recs, nil
}

// hostStatusText is the HOST record text (docs/protocol.md "Record
// texts"): 5.1.1's key list, 3.8.5's fields with, before owner_name, the ones 5.1.1 added
// (no_timeout, dead_ext, found_dead_ext_gen, wrote_dead_ext_gen,
// host_flags and host_state: the get_hosts flags and state name of st).
func hostStatusText(h *delta.HostStatus, st delta.HostInfo) string {
	name := h.OwnerName
	if len(name) > wire.NameLen {
		name = name[:wire.NameLen]
	}
	b01 := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	return fmt.Sprintf("last_check=%d last_live=%d last_req=%d owner_id=%d owner_generation=%d timestamp=%d "+
		"io_timeout=%d no_timeout=%d dead_ext=%d found_dead_ext_gen=%d wrote_dead_ext_gen=%d host_flags=0x%x "+
		"host_state=%s owner_name=%s", h.LastCheck, h.LastLive, h.LastReq, h.OwnerID, h.OwnerGeneration,
		h.Timestamp, h.IOTimeout, b01(h.NoTimeout()), b01(h.DeadExt()), h.FoundDeadExtGen, h.WroteDeadExtGen,
		st.Flags(), st.State, name)
}

// GetHosts answers GET_HOSTS (docs/delta.md "get_hosts").
func (m *Lockspaces) GetHosts(name string, hostID uint64) ([]wire.Host, error) {
	run, ok := m.Joined(name)
	if !ok {
		return nil, rescode.ErrENOENT
	}
	infos, err := run.GetHosts(hostID)
	if err != nil {
		return nil, resultErr(err)
	}
	out := make([]wire.Host, len(infos))
	for i, h := range infos {
		out[i] = wire.Host{HostID: h.HostID, Generation: h.Generation, Timestamp: h.Timestamp,
			IOTimeout: h.IOTimeout, Flags: h.Flags()}
	}
	return out, nil
}

// OwnerView is our view of host hostID of lockspace space, for
// ACQUIRE2's owner record: its state (the low bits of a host record's
// flags; UNKNOWN when we have no table yet) and the host name of its
// delta lease as our renewals last read it.
func (m *Lockspaces) OwnerView(space string, hostID uint64) (state uint32, name string) {
	run, ok := m.Joined(space)
	if !ok {
		return uint32(delta.HostUnknown), ""
	}
	hs, _ := run.Host(hostID)
	return uint32(run.HostState(hostID)), hs.OwnerName
}

// Renewals answers RENEWAL: the history and the own io_timeout, or
// -ENOSPC when no lockspace of that name exists.
func (m *Lockspaces) Renewals(name string) ([]delta.HistoryEntry, int, error) {
	m.mu.Lock()
	sp := m.anyByName(name)
	var run *delta.Lockspace
	if sp != nil {
		run = sp.run
	}
	m.mu.Unlock()
	if sp == nil {
		return nil, 0, causeErr(rescode.ErrENOSPC, "no lockspace "+name)
	}
	if run == nil {
		return nil, sp.ioTimeoutNow(), nil
	}
	return run.Renewals(), sp.ioTimeoutNow(), nil
}

// SetEvent answers SET_EVENT (docs/delta.md "set_event").
func (m *Lockspaces) SetEvent(name string, he wire.HostEvent, flags uint32) error {
	if name == "" || he.HostID == 0 || he.HostID > delta.MaxHostID {
		return rescode.ErrEINVAL
	}
	run, ok := m.Joined(name)
	if !ok {
		return rescode.ErrENOENT
	}
	err := run.SetEvent(delta.HostEvent{HostID: he.HostID, Generation: he.Generation, Event: he.Event, Data: he.Data}, flags)
	return resultErr(err)
}

// SetConfig answers SET_CONFIG (docs/delta.md "set_config").
func (m *Lockspaces) SetConfig(name string, cmd uint32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	sp := m.byName(listSpaces, name)
	if sp == nil {
		return rescode.ErrENOENT
	}
	switch cmd {
	case wire.ConfigUsed, wire.ConfigUsedByOrphans:
		if sp.end.dead() {
			return rescode.ErrENOSPC
		}
		if cmd == wire.ConfigUsed {
			sp.externalUsed = true
		} else {
			sp.usedByOrphans = true
		}
	case wire.ConfigUnused:
		sp.externalUsed = false
	case wire.ConfigUnusedByOrphans:
		sp.usedByOrphans = false
	default:
		return rescode.ErrEINVAL
	}
	return nil
}

// SetIOTimeout is SET_CONFIG IO_TIMEOUT: lockspace name renews with
// io_timeout io from its next renewal (docs/delta.md "Changing the
// io_timeout"). -ENOENT when it is not joined, -EINVAL for 0 or more than
// delta.MaxSetIOTimeout.
func (m *Lockspaces) SetIOTimeout(name string, io uint32) error {
	m.mu.Lock()
	sp := m.byName(listSpaces, name)
	var run *delta.Lockspace
	if sp != nil {
		run = sp.run
	}
	m.mu.Unlock()
	if sp == nil || run == nil {
		return rescode.ErrENOENT
	}
	if io > delta.MaxSetIOTimeout {
		return rescode.ErrEINVAL
	}
	return resultErr(run.SetIOTimeout(int(io)))
}

// Examine asks the resource side to examine the resources held in
// lockspace name (EXAMINE_LOCKSPACE); it does not block.
func (m *Lockspaces) Examine(name string) { m.examine(name) }

// Open opens a lease disk with the lockspace opener (tests inject devices
// through Setup.Open).
func (m *Lockspaces) Open(path string) (diskfmt.Device, error) { return m.cfg.Open(path) }

// Now is the manager's monotonic clock.
func (m *Lockspaces) Now() time.Duration { return m.cfg.Clock.Now() }

// SpaceInfo is one lockspace as the metrics see it.
type SpaceInfo struct {
	Lockspace wire.Lockspace
	IOTimeout int
	List      string // "add", "spaces" or "rem"
	Run       *delta.Lockspace
}

// Snapshot lists every lockspace, list by list (add, spaces, rem).
func (m *Lockspaces) Snapshot() []SpaceInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []SpaceInfo
	for _, sps := range m.lists {
		for _, sp := range sps {
			out = append(out, SpaceInfo{sp.ls, sp.ioTimeoutNow(), sp.list.String(), sp.run})
		}
	}
	return out
}
