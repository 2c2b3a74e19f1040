package cli

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/diskfmt"
)

// `sanlock client locks [-s LOCKSPACE] [-r RESOURCE ...] [--json]` (a
// gosanlock addition, docs/json.md): who holds what, as seen by the daemon
// it asks. It is read-only and built only on wire commands that sanlock
// 3.8.5 answers too (STATUS, GET_LOCKSPACES, GET_HOSTS, HOST_STATUS,
// READ_RESOURCE_OWNERS), so it works against the C daemon as well.
//
// Hosts: every host of every joined lockspace (or of -s), with the name
// from its delta lease (the owner_name the daemon last read there), its
// generation, timestamp and state, and how long ago the daemon saw it
// renew (or how long it has been dead), in the daemon's own monotonic
// seconds, so the ages hold whatever the hosts' clocks say. Lockspaces:
// their state, FAILED when this host's renewal failed. Resources: every
// lease this daemon holds, adds, releases or keeps as an orphan, plus
// every -r resource; the owners come from the lease on disk
// (READ_RESOURCE_OWNERS), the local processes from the daemon's records
// and /proc/PID/comm.

// LocksJSON is `client locks --json`. Monotime is the daemon's monotonic
// time in seconds when it answered: the ages are counted from it.
type LocksJSON struct {
	JSONHead
	HostName   string           `json:"host_name"`
	Monotime   uint64           `json:"monotime"`
	Lockspaces []LocksLockspace `json:"lockspaces"`
	Resources  []LocksResource  `json:"resources"`
}

// LocksLockspace is a lockspace this daemon has joined, is joining or
// leaving, or in which it failed (state JOINED, ADD, REM or FAILED, see
// lsJoined). host_id is this daemon's host id in it; renewal_last_result
// is the result of its last renewal there: 1 (sanlock's OK), a negative
// error code, or 0 before the first.
type LocksLockspace struct {
	Name              string      `json:"name"`
	HostID            uint64      `json:"host_id"`
	Path              string      `json:"path"`
	Offset            uint64      `json:"offset"`
	State             string      `json:"state"`
	RenewalLastResult int         `json:"renewal_last_result"`
	HostsResult       int         `json:"hosts_result"`
	Hosts             []LocksHost `json:"hosts"`
}

// LocksHost is a host of a lockspace. Local marks this daemon's own host.
// LastLive, RenewedAgo and DeadFor are its ages (daemonView.hostAge).
type LocksHost struct {
	HostID     uint64  `json:"host_id"`
	Name       string  `json:"name"`
	Generation uint64  `json:"generation"`
	Timestamp  uint64  `json:"timestamp"`
	State      string  `json:"state"`
	Local      bool    `json:"local"`
	LastLive   uint64  `json:"last_live"`
	RenewedAgo *uint64 `json:"renewed_ago,omitempty"`
	DeadFor    *uint64 `json:"dead_for,omitempty"`
}

// defaultFireTimeout is the watchdog fire timeout of a daemon whose record
// does not say (3.8.5 sends no watchdog_fire_timeout key).
const defaultFireTimeout = 60

// daemonView is what the ages are computed from, out of one STATUS reply:
// the daemon's monotonic time (now), its watchdog fire timeout and each
// lockspace's LOCKSPACE record.
type daemonView struct {
	now, fire uint64
	spaces    map[string]Keys
}

func viewOf(recs []client.StateRecord) daemonView {
	v := daemonView{fire: defaultFireTimeout, spaces: map[string]Keys{}}
	for i := range recs {
		switch k := parseKeys(recs[i].Text); recs[i].Type {
		case client.StateDaemon:
			v.now = k.num("monotime")
			if _, ok := k["watchdog_fire_timeout"]; ok {
				v.fire = k.num("watchdog_fire_timeout")
			}
		case client.StateLockspace:
			if recs[i].Lockspace != nil {
				v.spaces[recs[i].Lockspace.Name] = k
			}
		}
	}
	return v
}

// hostRecords is the HOST records of lockspace name by host_id (none when
// HOST_STATUS fails).
func (c *clientRun) hostRecords(name string) map[uint64]HostStatusHost {
	out := map[uint64]HostStatusHost{}
	if hs, err := c.cl.HostStatus(context.Background(), name); err == nil {
		for _, h := range hostStatusHosts(hs) {
			out[h.HostID] = h
		}
	}
	return out
}

// hostAge is the ages of host h of lockspace ls, in which this daemon is
// host ourID, as v and the lockspace's HOST records (recs) tell them:
// last is when the daemon last saw h renew (for this host: its last
// successful renewal; 0: never); ago is now-last; dead, for a DEAD host,
// how long it has been past the dead limit (8 times its io_timeout plus
// the watchdog fire timeout, docs/delta.md "Host states"). A FREE host has
// no ages, nor has an UNKNOWN one: the daemon has not seen it renew, and
// its last_live is when the daemon first read the lease. A host first
// read already dead is DEAD for as long as the daemon can tell, counted
// from that first read.
func (v daemonView) hostAge(ls string, ourID uint64, h client.Host, recs map[uint64]HostStatusHost) (last uint64, ago, dead *uint64) {
	if h.Timestamp == 0 {
		return 0, nil, nil
	}
	rec := recs[h.HostID]
	last, io := rec.LastLive, rec.IOTimeout
	if h.HostID == ourID {
		last = v.spaces[ls].num("renewal_last_success")
	}
	if io == 0 {
		io = uint64(h.IOTimeout)
	}
	state := hostState(h.Flags)
	if state == "UNKNOWN" {
		return last, nil, nil
	}
	ago = agePtr(v.now, last)
	if state != "DEAD" || ago == nil {
		return last, ago, nil
	}
	limit := 8*io + v.fire
	d := uint64(0)
	if *ago > limit {
		d = *ago - limit
	}
	return last, ago, &d
}

// LocksResource is one resource lease. Mode is EX (an exclusive owner),
// SH (only shared holders), FREE (no owner) or UNKNOWN (the lease could not
// be read and no local process holds it); read_result is the result of
// reading the lease (0, or the error code).
type LocksResource struct {
	Lockspace  string         `json:"lockspace"`
	Name       string         `json:"name"`
	Disks      []JSONDisk     `json:"disks"`
	Lver       uint64         `json:"lver"`
	Mode       string         `json:"mode"`
	ReadResult int            `json:"read_result"`
	Owners     []LocksOwner   `json:"owners"`
	Local      []LocksProcess `json:"local"`
}

// LocksOwner is a host that owns the lease on disk (mode EX) or holds it
// shared (mode SH).
type LocksOwner struct {
	HostID     uint64 `json:"host_id"`
	Name       string `json:"name"`
	Generation uint64 `json:"generation"`
	Mode       string `json:"mode"`
	Local      bool   `json:"local"`
}

// LocksProcess is a process of this host that the daemon lists for the
// lease; list is held, add, rem or orphan (status, docs/protocol.md "Record texts").
type LocksProcess struct {
	Pid     int32  `json:"pid"`
	Command string `json:"command"`
	Mode    string `json:"mode"`
	Lver    uint64 `json:"lver"`
	List    string `json:"list"`
}

// procComm is the command name of pid (empty when gone or unreadable).
func procComm(pid int32) string {
	if pid <= 0 {
		return ""
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}

// leaseFlags returns the sector/align request flags for a lease whose
// status record names its sizes (none when unknown: the daemon probes).
func leaseFlags(k Keys) uint32 {
	g, ok := diskfmt.LookupGeometry(int(k.num("sector_size")), int(k.num("align_size")))
	if !ok {
		return 0
	}
	return diskfmt.SizeFlags(g)
}

// collectLocks asks the daemon and builds the report of the lockspace
// only (every one if empty), with the leases of resources read too; the
// int is the exit status.
func (c *clientRun) collectLocks(only string, resources []client.Resource) (*LocksJSON, int) {
	out := &LocksJSON{JSONHead: jsonHead("locks"), Lockspaces: []LocksLockspace{}, Resources: []LocksResource{}}
	if c.err != nil {
		out.Result = rvDial
		return out, 1
	}
	recs, err := c.cl.Status(context.Background(), 0)
	if err != nil && len(recs) == 0 {
		out.Result = rv(err)
		return out, 1
	}
	spaces, err := c.cl.GetLockspaces(context.Background())
	if err != nil {
		out.Result = rv(err)
		return out, 1
	}
	names := map[string]map[uint64]string{} // lockspace -> host_id -> name
	view := viewOf(recs)
	out.Monotime = view.now
	for _, rec := range recs {
		if rec.Type == client.StateDaemon {
			out.HostName = rec.Name
		}
	}
	for i := range spaces {
		ls := &spaces[i]
		if only != "" && ls.Name != only {
			continue
		}
		e := LocksLockspace{Name: ls.Name, HostID: ls.HostID, Path: ls.Disk.Path, Offset: ls.Disk.Offset,
			State: lockspaceState(ls), Hosts: []LocksHost{}}
		if own, ok := view.spaces[ls.Name]; ok {
			if st := recordState(own); st == lsFailed || e.State == lsJoined {
				e.State = st
			}
			e.RenewalLastResult = int(own.int("renewal_last_result"))
		}
		seen := c.hostRecords(ls.Name)
		byID := map[uint64]string{}
		for id, h := range seen {
			byID[id] = h.OwnerName
		}
		if byID[ls.HostID] == "" {
			byID[ls.HostID] = out.HostName
		}
		names[ls.Name] = byID
		hosts, err := c.cl.GetHosts(context.Background(), ls.Name, 0)
		e.HostsResult = rv(err)
		for _, h := range hosts {
			lh := LocksHost{HostID: h.HostID, Name: byID[h.HostID], Generation: h.Generation,
				Timestamp: h.Timestamp, State: hostState(h.Flags), Local: h.HostID == ls.HostID}
			lh.LastLive, lh.RenewedAgo, lh.DeadFor = view.hostAge(ls.Name, ls.HostID, h, seen)
			e.Hosts = append(e.Hosts, lh)
		}
		out.Lockspaces = append(out.Lockspaces, e)
	}
	if only != "" && len(out.Lockspaces) == 0 && len(resources) == 0 {
		out.Result = client.RvENOENT // not a lockspace of this daemon
		return out, 1
	}
	ourID := map[string]uint64{}
	for i := range spaces {
		ourID[spaces[i].Name] = spaces[i].HostID
	}

	// The resources: the daemon's records first, then -r.
	type key struct{ ls, name string }
	index := map[key]int{}
	var reqs []client.Resource
	add := func(r client.Resource) int {
		k := key{r.LockspaceName, r.Name}
		if i, ok := index[k]; ok {
			if len(out.Resources[i].Disks) == 0 && len(r.Disks) > 0 {
				out.Resources[i].Disks = jsonDisks(r.Disks)
				reqs[i] = r
			}
			return i
		}
		index[k] = len(out.Resources)
		out.Resources = append(out.Resources, LocksResource{Lockspace: r.LockspaceName, Name: r.Name,
			Disks: jsonDisks(r.Disks), Owners: []LocksOwner{}, Local: []LocksProcess{}})
		reqs = append(reqs, r)
		return len(out.Resources) - 1
	}
	for i := range recs {
		rec := &recs[i]
		if rec.Type != client.StateResource || rec.Resource == nil {
			continue
		}
		if only != "" && rec.Resource.LockspaceName != only {
			continue
		}
		k := parseKeys(rec.Text)
		r := *rec.Resource
		r.Flags = leaseFlags(k)
		r.LVer = 0
		idx := add(r)
		pid := int32(rec.Data32)
		out.Resources[idx].Local = append(out.Resources[idx].Local, LocksProcess{Pid: pid, Command: procComm(pid),
			Mode: modeOf(rec.Resource.Flags), Lver: rec.Data64, List: k["list"]})
	}
	for _, r := range resources {
		r.Flags &^= client.ResShared | client.ResLVer
		r.LVer = 0
		add(r)
	}

	for i := range out.Resources {
		e := &out.Resources[i]
		e.Mode = "UNKNOWN"
		for _, p := range e.Local {
			e.Lver = max(e.Lver, p.Lver)
			if p.Mode == "EX" || e.Mode == "UNKNOWN" {
				e.Mode = p.Mode
			}
		}
		if len(reqs[i].Disks) == 0 {
			e.ReadResult = client.RvEINVAL
			continue
		}
		req := reqs[i]
		got, hosts, err := c.cl.ReadResourceOwners(context.Background(), &req)
		if e.ReadResult = rv(err); e.ReadResult < 0 {
			continue
		}
		e.Lver = got.LVer
		e.Mode = "FREE"
		byID := names[e.Lockspace]
		shared := got.Flags&client.ResShared != 0
		seen := map[uint64]bool{}
		for _, h := range hosts {
			// Only an exclusive owner carries a timestamp (docs/protocol.md);
			// when the lease also has shared holders, a timestamped
			// owner is a host in the middle of a shared acquire.
			if seen[h.HostID] {
				continue
			}
			seen[h.HostID] = true
			m := "SH"
			if h.Timestamp != 0 && !shared {
				m = "EX"
			}
			if m == "EX" || e.Mode == "FREE" {
				e.Mode = m
			}
			id, ok := ourID[e.Lockspace]
			e.Owners = append(e.Owners, LocksOwner{HostID: h.HostID, Name: byID[h.HostID], Generation: h.Generation,
				Mode: m, Local: ok && id == h.HostID})
		}
	}
	return out, 0
}

func (c *clientRun) locks(o *LocksOptions) int {
	l, status := c.collectLocks(o.Lockspace, o.Resources)
	if o.JSON {
		if l.Result != 0 {
			c.printJSON(l.JSONHead)
		} else {
			c.printJSON(l)
		}
		return status
	}
	if l.Result != 0 {
		c.printf("locks error %d\n", l.Result)
		return status
	}
	c.printLocks(l)
	return status
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printLocks prints the two tables: hosts, then resource holders (one row
// per owner, and per local process on this host's row).
func (c *clientRun) printLocks(l *LocksJSON) {
	w := tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "LOCKSPACE\tHOST_ID\tHOST_NAME\tGENERATION\tTIMESTAMP\tSTATE\tAGE")
	for _, ls := range l.Lockspaces {
		name := ls.Name
		if ls.State != lsJoined && ls.State != "" {
			name += " (" + ls.State + ")"
		}
		if ls.HostsResult != 0 {
			fmt.Fprintf(w, "%s\t-\t-\t-\t-\thosts error %d\t-\n", name, ls.HostsResult)
		}
		for _, h := range ls.Hosts {
			id := strconv.FormatUint(h.HostID, 10)
			if h.Local {
				id += "*"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", name, id, dash(h.Name), h.Generation, h.Timestamp, h.State, ageText(h))
		}
	}
	w.Flush()
	c.printf("\n")
	w = tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "LOCKSPACE\tRESOURCE\tMODE\tLVER\tHOST_ID\tHOST_NAME\tPID\tCOMMAND")
	for _, r := range l.Resources {
		row := func(mode, id, name, pid, cmd string) {
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.Lockspace, r.Name, mode, r.Lver, id, dash(name), pid, dash(cmd))
		}
		localDone := false
		for _, o := range r.Owners {
			id := strconv.FormatUint(o.HostID, 10)
			if !o.Local || len(r.Local) == 0 {
				row(o.Mode, id, o.Name, "-", "")
				continue
			}
			localDone = true
			for _, p := range r.Local {
				row(o.Mode, id+"*", o.Name, strconv.Itoa(int(p.Pid)), procLabel(p))
			}
		}
		if !localDone {
			for _, p := range r.Local {
				row(p.Mode, "*", "", strconv.Itoa(int(p.Pid)), procLabel(p))
			}
		}
		if len(r.Owners) == 0 && len(r.Local) == 0 {
			mode := r.Mode
			if r.ReadResult != 0 {
				mode = fmt.Sprintf("%s(read %d)", mode, r.ReadResult)
			}
			row(mode, "-", "", "-", "")
		}
	}
	w.Flush()
}

// ageText is the AGE column: "dead for N s" for a DEAD host, else
// "renewed N s ago", or "-" when the daemon has not seen it renew.
func ageText(h LocksHost) string {
	switch {
	case h.DeadFor != nil:
		return fmt.Sprintf("dead for %d s", *h.DeadFor)
	case h.RenewedAgo != nil:
		return fmt.Sprintf("renewed %d s ago", *h.RenewedAgo)
	}
	return "-"
}

// procLabel is the command name, with the list when the lease is not
// simply held (add, rem, orphan).
func procLabel(p LocksProcess) string {
	if p.List != "" && p.List != "held" {
		return dash(p.Command) + " (" + p.List + ")"
	}
	return p.Command
}
