package cli

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/gosanlock/gosanlock/client"
)

// The --json output of the status-like client actions (docs/json.md; one
// JSON Schema per action under docs/schema/). Each action prints exactly one
// JSON object and a newline on stdout. Every object has "action" and
// "result" (0, or the negative sanlock/errno code that made the action
// fail); when result is not 0 the other fields may be missing. The exit
// status is the one of the text output. Only the wire commands that
// sanlock 3.8.5 also answers are used, so --json works against either
// daemon.

// JSONHead is the part every --json object starts with.
type JSONHead struct {
	Action string `json:"action"`
	Result int    `json:"result"`
}

// JSONDisk is one lease area: a path and a byte offset.
type JSONDisk struct {
	Path   string `json:"path"`
	Offset uint64 `json:"offset"`
}

// Keys are the key=value pairs of a daemon state record (docs/protocol.md "Record texts"),
// values kept as the daemon wrote them.
type Keys map[string]string

func parseKeys(text string) Keys {
	k := Keys{}
	for _, kv := range strings.Split(text, " ") {
		if kv == "" {
			continue
		}
		name, v, _ := strings.Cut(kv, "=")
		k[name] = v
	}
	return k
}

// num returns the key's value as a number (0 when missing or malformed).
func (k Keys) num(name string) uint64 {
	v, _ := strconv.ParseUint(k[name], 10, 64)
	return v
}

func (k Keys) int(name string) int64 {
	v, _ := strconv.ParseInt(k[name], 10, 64)
	return v
}

// ---- status ----

// StatusJSON is `client status --json`.
type StatusJSON struct {
	JSONHead
	Daemon     *StatusDaemon     `json:"daemon,omitempty"`
	Clients    []StatusClient    `json:"clients"`
	Lockspaces []StatusLockspace `json:"lockspaces"`
	Resources  []StatusResource  `json:"resources"`
}

// StatusDaemon is the DAEMON record.
type StatusDaemon struct {
	HostName string `json:"host_name"`
	Keys     Keys   `json:"keys"`
}

// StatusClient is a CLIENT record (pid -1 for the daemon's own slots).
type StatusClient struct {
	Pid  int32  `json:"pid"`
	Name string `json:"name"`
	Keys Keys   `json:"keys"`
}

// StatusLockspace is a LOCKSPACE record; list is spaces, add or rem.
type StatusLockspace struct {
	Name   string `json:"name"`
	HostID uint64 `json:"host_id"`
	Path   string `json:"path"`
	Offset uint64 `json:"offset"`
	List   string `json:"list"`
	Keys   Keys   `json:"keys"`
}

// StatusResource is a RESOURCE record; list is held, add, rem or orphan.
type StatusResource struct {
	Lockspace string     `json:"lockspace"`
	Name      string     `json:"name"`
	Disks     []JSONDisk `json:"disks"`
	Lver      uint64     `json:"lver"`
	Mode      string     `json:"mode"` // EX or SH
	Pid       int32      `json:"pid"`
	List      string     `json:"list"`
	Keys      Keys       `json:"keys"`
}

func jsonDisks(ds []client.Disk) []JSONDisk {
	out := make([]JSONDisk, 0, len(ds))
	for _, d := range ds {
		out = append(out, JSONDisk{Path: d.Path, Offset: d.Offset})
	}
	return out
}

func modeOf(flags uint32) string {
	if flags&client.ResShared != 0 {
		return "SH"
	}
	return "EX"
}

func statusResource(rec *client.StateRecord) StatusResource {
	k := parseKeys(rec.Text)
	r := client.Resource{}
	if rec.Resource != nil {
		r = *rec.Resource
	}
	return StatusResource{
		Lockspace: r.LockspaceName, Name: r.Name, Disks: jsonDisks(r.Disks),
		Lver: rec.Data64, Mode: modeOf(r.Flags), Pid: int32(rec.Data32), List: k["list"], Keys: k,
	}
}

func statusJSON(recs []client.StateRecord) *StatusJSON {
	s := &StatusJSON{JSONHead: JSONHead{Action: "status"},
		Clients: []StatusClient{}, Lockspaces: []StatusLockspace{}, Resources: []StatusResource{}}
	for i := range recs {
		rec := &recs[i]
		k := parseKeys(rec.Text)
		switch rec.Type {
		case client.StateDaemon:
			s.Daemon = &StatusDaemon{HostName: rec.Name, Keys: k}
		case client.StateClient:
			s.Clients = append(s.Clients, StatusClient{Pid: int32(rec.Data32), Name: rec.Name, Keys: k})
		case client.StateLockspace:
			ls := client.Lockspace{}
			if rec.Lockspace != nil {
				ls = *rec.Lockspace
			}
			s.Lockspaces = append(s.Lockspaces, StatusLockspace{Name: ls.Name, HostID: ls.HostID,
				Path: ls.Disk.Path, Offset: ls.Disk.Offset, List: k["list"], Keys: k})
		case client.StateResource:
			s.Resources = append(s.Resources, statusResource(rec))
		}
	}
	return s
}

// ---- gets ----

// GetsJSON is `client gets --json [-h 1]`.
type GetsJSON struct {
	JSONHead
	Lockspaces []GetsLockspace `json:"lockspaces"`
}

// GetsLockspace is one lockspace of GET_LOCKSPACES; state is "", ADD or
// REM. Hosts are there with -h 1 (hosts_result -11 when not ready yet).
type GetsLockspace struct {
	Name        string     `json:"name"`
	HostID      uint64     `json:"host_id"`
	Path        string     `json:"path"`
	Offset      uint64     `json:"offset"`
	State       string     `json:"state"`
	Hosts       []GetsHost `json:"hosts,omitempty"`
	HostsResult *int       `json:"hosts_result,omitempty"`
}

// GetsHost is one host of GET_HOSTS.
type GetsHost struct {
	HostID     uint64 `json:"host_id"`
	Generation uint64 `json:"generation"`
	Timestamp  uint64 `json:"timestamp"`
	State      string `json:"state"`
}

func lockspaceState(ls *client.Lockspace) string {
	switch {
	case ls.Flags&client.LSFAdd != 0:
		return "ADD"
	case ls.Flags&client.LSFRem != 0:
		return "REM"
	}
	return ""
}

func getsHosts(hosts []client.Host) []GetsHost {
	out := make([]GetsHost, 0, len(hosts))
	for _, h := range hosts {
		out = append(out, GetsHost{HostID: h.HostID, Generation: h.Generation, Timestamp: h.Timestamp, State: hostState(h.Flags)})
	}
	return out
}

// ---- host_status ----

// HostStatusJSON is `client host_status --json [-s LOCKSPACE]`.
type HostStatusJSON struct {
	JSONHead
	Lockspaces []HostStatusLockspace `json:"lockspaces"`
}

// HostStatusLockspace is the HOST records of one lockspace.
type HostStatusLockspace struct {
	Name   string           `json:"name"`
	Result int              `json:"result"`
	Hosts  []HostStatusHost `json:"hosts"`
}

// HostStatusHost is one HOST record: what the daemon last read in that
// host's delta lease.
type HostStatusHost struct {
	HostID     uint64 `json:"host_id"`
	Timestamp  uint64 `json:"timestamp"`
	Generation uint64 `json:"generation"`
	OwnerName  string `json:"owner_name"`
	IOTimeout  uint64 `json:"io_timeout"`
	Keys       Keys   `json:"keys"`
}

func hostStatusHosts(recs []client.StateRecord) []HostStatusHost {
	out := make([]HostStatusHost, 0, len(recs))
	for i := range recs {
		k := parseKeys(recs[i].Text)
		out = append(out, HostStatusHost{HostID: uint64(recs[i].Data32), Timestamp: recs[i].Data64,
			Generation: k.num("owner_generation"), OwnerName: k["owner_name"], IOTimeout: k.num("io_timeout"), Keys: k})
	}
	return out
}

// ---- renewal ----

// RenewalJSON is `client renewal --json -s LOCKSPACE`, oldest first.
type RenewalJSON struct {
	JSONHead
	Lockspace string         `json:"lockspace"`
	Renewals  []RenewalEntry `json:"renewals"`
}

// RenewalEntry is one RENEWAL record.
type RenewalEntry struct {
	Timestamp    uint64 `json:"timestamp"`
	ReadMS       int64  `json:"read_ms"`
	WriteMS      int64  `json:"write_ms"`
	NextTimeouts int64  `json:"next_timeouts"`
	NextErrors   int64  `json:"next_errors"`
}

// ---- inquire ----

// InquireJSON is `client inquire --json -p PID`.
type InquireJSON struct {
	JSONHead
	Pid       int               `json:"pid"`
	ResCount  int               `json:"res_count"`
	State     string            `json:"state"`
	Resources []InquireResource `json:"resources"`
}

// InquireResource is one lease of the inquire state string.
type InquireResource struct {
	Lockspace string     `json:"lockspace"`
	Name      string     `json:"name"`
	Disks     []JSONDisk `json:"disks"`
	Lver      uint64     `json:"lver"`
	Mode      string     `json:"mode"`
}

// ---- the --json actions ----

// printJSON writes v indented, with a final newline.
func (c *clientRun) printJSON(v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil { // only plain types: cannot happen
		b = []byte(`{"action":"error","result":-1}`)
	}
	c.out.Write(append(b, '\n'))
}

// jsonFail prints the head alone and returns the exit status 1.
func (c *clientRun) jsonFail(action string, r int) int {
	if r == 0 {
		r = rvDial
	}
	c.printJSON(JSONHead{Action: action, Result: r})
	return 1
}

func (c *clientRun) statusJSON() int {
	if c.err != nil {
		return c.jsonFail("status", rvDial)
	}
	recs, err := c.cl.Status(context.Background(), 0)
	if err != nil && len(recs) == 0 {
		return c.jsonFail("status", rv(err))
	}
	c.printJSON(statusJSON(recs))
	return 0
}

func (c *clientRun) getsJSON(getHosts bool) int {
	var spaces []client.Lockspace
	r := c.call(func() (err error) { spaces, err = c.cl.GetLockspaces(context.Background()); return err })
	if r < 0 {
		return c.jsonFail("gets", r)
	}
	g := &GetsJSON{JSONHead: JSONHead{Action: "gets"}, Lockspaces: []GetsLockspace{}}
	for i := range spaces {
		ls := &spaces[i]
		e := GetsLockspace{Name: ls.Name, HostID: ls.HostID, Path: ls.Disk.Path, Offset: ls.Disk.Offset, State: lockspaceState(ls)}
		if getHosts {
			hosts, err := c.cl.GetHosts(context.Background(), ls.Name, 0)
			if hr := rv(err); hr < 0 {
				e.HostsResult = &hr
			} else {
				e.Hosts = getsHosts(hosts)
			}
		}
		g.Lockspaces = append(g.Lockspaces, e)
	}
	c.printJSON(g)
	return 0
}

func (c *clientRun) hostStatusJSON(name string) int {
	if c.err != nil {
		return c.jsonFail("host_status", rvDial)
	}
	h := &HostStatusJSON{JSONHead: JSONHead{Action: "host_status"}, Lockspaces: []HostStatusLockspace{}}
	if name != "" {
		recs, err := c.cl.HostStatus(context.Background(), name)
		if err != nil {
			return c.jsonFail("host_status", rv(err))
		}
		h.Lockspaces = append(h.Lockspaces, HostStatusLockspace{Name: name, Hosts: hostStatusHosts(recs)})
		c.printJSON(h)
		return 0
	}
	spaces, err := c.cl.GetLockspaces(context.Background())
	if err != nil {
		return c.jsonFail("host_status", rv(err))
	}
	for _, ls := range spaces {
		recs, err := c.cl.HostStatus(context.Background(), ls.Name)
		h.Lockspaces = append(h.Lockspaces, HostStatusLockspace{Name: ls.Name, Result: rv(err), Hosts: hostStatusHosts(recs)})
	}
	c.printJSON(h)
	return 0
}

func (c *clientRun) renewalJSON(name string) int {
	if name == "" {
		return c.jsonFail("renewal", client.RvEINVAL)
	}
	if c.err != nil {
		return c.jsonFail("renewal", rvDial)
	}
	recs, err := c.cl.Renewal(context.Background(), name)
	if err != nil {
		return c.jsonFail("renewal", rv(err))
	}
	out := &RenewalJSON{JSONHead: JSONHead{Action: "renewal"}, Lockspace: name, Renewals: []RenewalEntry{}}
	for i := range recs {
		k := parseKeys(recs[i].Text)
		out.Renewals = append(out.Renewals, RenewalEntry{Timestamp: k.num("timestamp"), ReadMS: k.int("read_ms"),
			WriteMS: k.int("write_ms"), NextTimeouts: k.int("next_timeouts"), NextErrors: k.int("next_errors")})
	}
	c.printJSON(out)
	return 0
}

func (c *clientRun) inquireJSON(t Target) int {
	var inq client.Inquiry
	r := c.call(func() (err error) { inq, err = inquireTarget(c.cl, t); return err })
	state, count := inq.State, inq.Count
	if r < 0 {
		return c.jsonFail("inquire", r)
	}
	out := &InquireJSON{JSONHead: JSONHead{Action: "inquire"}, Pid: t.Pid, ResCount: count, State: state,
		Resources: []InquireResource{}}
	res, _ := client.ParseState(state)
	for i := range res {
		out.Resources = append(out.Resources, InquireResource{Lockspace: res[i].LockspaceName, Name: res[i].Name,
			Disks: jsonDisks(res[i].Disks), Lver: res[i].LVer, Mode: modeOf(res[i].Flags)})
	}
	c.printJSON(out)
	return exitStatus(r)
}
