package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"github.com/gosanlock/gosanlock/client"
)

// The --json output of the status-like client actions (docs/json.md; one
// JSON Schema per action under docs/schema/). Each action prints exactly one
// JSON object and a newline on stdout. Every object starts with "schema"
// (JSONSchemaVersion), "action" and "result" (0, or the negative
// sanlock/errno code that made the action fail); when result is not 0 the
// other fields are missing. The exit
// status is the one of the text output. Only the wire commands that
// sanlock 3.8.5 also answers are used, so --json works against either
// daemon.

// JSONSchemaVersion is the "schema" of every --json object: the version
// of the layout docs/json.md and docs/schema/ describe. It grows when a
// field is renamed, removed or changes its type.
const JSONSchemaVersion = 2

// JSONHead is the part every --json object starts with.
type JSONHead struct {
	Schema int    `json:"schema"`
	Action string `json:"action"`
	Result int    `json:"result"`
}

// jsonHead is the head of a successful action's object.
func jsonHead(action string) JSONHead {
	return JSONHead{Schema: JSONSchemaVersion, Action: action}
}

// JSONDisk is one lease area: a path and a byte offset.
type JSONDisk struct {
	Path   string `json:"path"`
	Offset uint64 `json:"offset"`
}

// Keys are the key=value pairs of a daemon state record (docs/protocol.md
// "Record texts"), values kept as the daemon wrote them. In JSON a value
// is typed (MarshalJSON): a boolean for the 0/1 flags in boolKeys, an
// integer when it is a plain decimal integer, else a string.
type Keys map[string]string

// boolKeys are the record keys that are yes/no flags (0 or 1) in every
// daemon; any other value of theirs stays a number.
var boolKeys = map[string]bool{
	// DAEMON
	"use_watchdog": true, "high_priority": true, "quiet_fail": true, "debug_renew": true, "debug_hosts": true,
	"debug_clients": true, "debug_cmds": true, "use_hugepages": true, "use_compare_and_write": true,
	// CLIENT
	"pid_dead": true, "suspend": true, "need_free": true,
	// LOCKSPACE
	"renew_fail": true, "space_dead": true, "external_used": true, "used_by_orphans": true,
	"no_timeout": true, "no_watchdog": true, "caw": true,
	// RESOURCE
	"reused": true,
}

// stringKeys are the record keys whose values are names or words, strings
// even when they look like numbers (a host named "1234"); so are the keys
// ending in "_hex", whose digits are hexadecimal.
var stringKeys = map[string]bool{
	"our_host_name": true, "owner_name": true, "version_str": true, "list": true, "host_state": true,
}

// decimal says s is a plain decimal integer that fits 64 bits, without a
// "+" or leading zeros, so the JSON number reads back as the same text.
func decimal(s string) bool {
	d := strings.TrimPrefix(s, "-")
	if d == "" || (len(d) > 1 && d[0] == '0') || (d == "0" && s != d) {
		return false
	}
	for _, c := range d {
		if c < '0' || c > '9' {
			return false
		}
	}
	if s[0] == '-' {
		_, err := strconv.ParseInt(s, 10, 64)
		return err == nil
	}
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}

// MarshalJSON writes the pairs sorted by key, each value typed (see Keys).
func (k Keys) MarshalJSON() ([]byte, error) {
	names := make([]string, 0, len(k))
	for n := range k {
		names = append(names, n)
	}
	sort.Strings(names)
	var b bytes.Buffer
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		key, _ := json.Marshal(n)
		b.Write(key)
		b.WriteByte(':')
		v := k[n]
		switch {
		case boolKeys[n] && (v == "0" || v == "1"):
			b.WriteString(strconv.FormatBool(v == "1"))
		case !stringKeys[n] && !strings.HasSuffix(n, "_hex") && decimal(v):
			b.WriteString(v)
		default:
			s, _ := json.Marshal(v)
			b.Write(s)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads what MarshalJSON writes back into the daemon's
// texts: true and false become 1 and 0, numbers their digits.
func (k *Keys) UnmarshalJSON(data []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	out := make(Keys, len(m))
	for n, raw := range m {
		switch t := strings.TrimSpace(string(raw)); {
		case t == "true":
			out[n] = "1"
		case t == "false":
			out[n] = "0"
		case strings.HasPrefix(t, `"`):
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return err
			}
			out[n] = s
		default:
			var num json.Number
			if err := json.Unmarshal(raw, &num); err != nil {
				return err
			}
			out[n] = num.String()
		}
	}
	*k = out
	return nil
}

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
// State is what the record means (recordState); RenewedAgo is the age of
// this host's last successful renewal there, in seconds of the daemon's
// monotonic clock (missing when it never renewed).
type StatusLockspace struct {
	Name       string  `json:"name"`
	HostID     uint64  `json:"host_id"`
	Path       string  `json:"path"`
	Offset     uint64  `json:"offset"`
	List       string  `json:"list"`
	State      string  `json:"state"`
	RenewedAgo *uint64 `json:"renewed_ago,omitempty"`
	Keys       Keys    `json:"keys"`
}

// Lockspace states of the JSON output and of `locks`: JOINED (on the
// daemon's spaces list and renewing), ADD (being joined), REM (being
// left) and FAILED (this host's renewal failed or its lease was found
// corrupt: the daemon is stopping the lease holders and will drop it).
const (
	lsJoined = "JOINED"
	lsAdd    = "ADD"
	lsRem    = "REM"
	lsFailed = "FAILED"
)

// recordState is the state of a lockspace from its LOCKSPACE record.
func recordState(k Keys) string {
	switch {
	case k.int("renew_fail") != 0 || k.int("corrupt_result") != 0:
		return lsFailed
	case k["list"] == "add":
		return lsAdd
	case k["list"] == "rem":
		return lsRem
	}
	return lsJoined
}

// age is now-then in seconds, false when then is 0 (never) or now is 0
// (the daemon's time is not known). A then past now (read from the daemon
// after now was) is 0 s ago.
func age(now, then uint64) (uint64, bool) {
	if then == 0 || now == 0 {
		return 0, false
	}
	if now < then {
		return 0, true
	}
	return now - then, true
}

// agePtr is age as an optional JSON number.
func agePtr(now, then uint64) *uint64 {
	a, ok := age(now, then)
	if !ok {
		return nil
	}
	return &a
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
	s := &StatusJSON{JSONHead: jsonHead("status"),
		Clients: []StatusClient{}, Lockspaces: []StatusLockspace{}, Resources: []StatusResource{}}
	var now uint64 // the daemon's monotonic time, from its record
	for i := range recs {
		if recs[i].Type == client.StateDaemon {
			now = parseKeys(recs[i].Text).num("monotime")
		}
	}
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
				Path: ls.Disk.Path, Offset: ls.Disk.Offset, List: k["list"], State: recordState(k),
				RenewedAgo: agePtr(now, k.num("renewal_last_success")), Keys: k})
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
	Monotime   uint64          `json:"monotime,omitempty"`
	Lockspaces []GetsLockspace `json:"lockspaces"`
}

// GetsLockspace is one lockspace of GET_LOCKSPACES; state is JOINED, ADD
// or REM (the daemon's list; FAILED needs STATUS, see `locks`). Hosts are
// there with -h 1 (hosts_result -11 when not ready yet).
type GetsLockspace struct {
	Name        string     `json:"name"`
	HostID      uint64     `json:"host_id"`
	Path        string     `json:"path"`
	Offset      uint64     `json:"offset"`
	State       string     `json:"state"`
	Hosts       []GetsHost `json:"hosts,omitempty"`
	HostsResult *int       `json:"hosts_result,omitempty"`
}

// GetsHost is one host of GET_HOSTS, with its ages as in `locks`
// (daemonView.hostAge), counted from the GetsJSON's monotime.
type GetsHost struct {
	HostID     uint64  `json:"host_id"`
	Generation uint64  `json:"generation"`
	Timestamp  uint64  `json:"timestamp"`
	State      string  `json:"state"`
	LastLive   uint64  `json:"last_live"`
	RenewedAgo *uint64 `json:"renewed_ago,omitempty"`
	DeadFor    *uint64 `json:"dead_for,omitempty"`
}

func lockspaceState(ls *client.Lockspace) string {
	switch {
	case ls.Flags&client.LSFAdd != 0:
		return lsAdd
	case ls.Flags&client.LSFRem != 0:
		return lsRem
	}
	return lsJoined
}

// getsHosts is the hosts of lockspace ls (our host_id ourID) with their
// ages from v and the lockspace's HOST records.
func getsHosts(hosts []client.Host, v daemonView, ls string, ourID uint64, recs map[uint64]HostStatusHost) []GetsHost {
	out := make([]GetsHost, 0, len(hosts))
	for _, h := range hosts {
		g := GetsHost{HostID: h.HostID, Generation: h.Generation, Timestamp: h.Timestamp, State: hostState(h.Flags)}
		g.LastLive, g.RenewedAgo, g.DeadFor = v.hostAge(ls, ourID, h, recs)
		out = append(out, g)
	}
	return out
}

// ---- host_status ----

// HostStatusJSON is `client host_status --json [-s LOCKSPACE]`. Monotime
// is the daemon's monotonic time in seconds, read after the HOST records:
// the ages are counted from it (0 when the daemon did not say).
type HostStatusJSON struct {
	JSONHead
	Monotime   uint64                `json:"monotime"`
	Lockspaces []HostStatusLockspace `json:"lockspaces"`
}

// HostStatusLockspace is the HOST records of one lockspace.
type HostStatusLockspace struct {
	Name   string           `json:"name"`
	Result int              `json:"result"`
	Hosts  []HostStatusHost `json:"hosts"`
}

// HostStatusHost is one HOST record: what the daemon last read in that
// host's delta lease. LastLive is the daemon's monotonic time when it
// last saw the host's timestamp change or first read the lease (0:
// never); RenewedAgo is monotime-last_live, missing when last_live is 0.
type HostStatusHost struct {
	HostID     uint64  `json:"host_id"`
	Timestamp  uint64  `json:"timestamp"`
	Generation uint64  `json:"generation"`
	OwnerName  string  `json:"owner_name"`
	IOTimeout  uint64  `json:"io_timeout"`
	LastLive   uint64  `json:"last_live"`
	RenewedAgo *uint64 `json:"renewed_ago,omitempty"`
	Keys       Keys    `json:"keys"`
}

func hostStatusHosts(recs []client.StateRecord) []HostStatusHost {
	out := make([]HostStatusHost, 0, len(recs))
	for i := range recs {
		k := parseKeys(recs[i].Text)
		out = append(out, HostStatusHost{HostID: uint64(recs[i].Data32), Timestamp: recs[i].Data64,
			Generation: k.num("owner_generation"), OwnerName: k["owner_name"], IOTimeout: k.num("io_timeout"),
			LastLive: k.num("last_live"), Keys: k})
	}
	return out
}

// daemonMonotime is the daemon's monotonic time from its STATUS record (0
// when it cannot be had).
func (c *clientRun) daemonMonotime() uint64 {
	recs, _ := c.cl.Status(context.Background(), 0)
	for i := range recs {
		if recs[i].Type == client.StateDaemon {
			return parseKeys(recs[i].Text).num("monotime")
		}
	}
	return 0
}

// printHostStatus sets the ages of h's hosts from the daemon's time now
// and prints h.
func (c *clientRun) printHostStatus(h *HostStatusJSON) {
	h.Monotime = c.daemonMonotime()
	for i := range h.Lockspaces {
		for j := range h.Lockspaces[i].Hosts {
			host := &h.Lockspaces[i].Hosts[j]
			host.RenewedAgo = agePtr(h.Monotime, host.LastLive)
		}
	}
	c.printJSON(h)
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

// InquireJSON is `client inquire --json -p PID`. StateString is the
// daemon's lease string (empty when the pid holds nothing), parsed into
// Resources.
type InquireJSON struct {
	JSONHead
	Pid         int               `json:"pid"`
	ResCount    int               `json:"res_count"`
	StateString string            `json:"state_string"`
	Resources   []InquireResource `json:"resources"`
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
	c.printJSON(JSONHead{Schema: JSONSchemaVersion, Action: action, Result: r})
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
	g := &GetsJSON{JSONHead: jsonHead("gets"), Lockspaces: []GetsLockspace{}}
	var view daemonView
	if getHosts {
		recs, _ := c.cl.Status(context.Background(), 0)
		view = viewOf(recs)
		g.Monotime = view.now
	}
	for i := range spaces {
		ls := &spaces[i]
		e := GetsLockspace{Name: ls.Name, HostID: ls.HostID, Path: ls.Disk.Path, Offset: ls.Disk.Offset, State: lockspaceState(ls)}
		if getHosts {
			hosts, err := c.cl.GetHosts(context.Background(), ls.Name, 0)
			if hr := rv(err); hr < 0 {
				e.HostsResult = &hr
			} else {
				e.Hosts = getsHosts(hosts, view, ls.Name, ls.HostID, c.hostRecords(ls.Name))
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
	h := &HostStatusJSON{JSONHead: jsonHead("host_status"), Lockspaces: []HostStatusLockspace{}}
	if name != "" {
		recs, err := c.cl.HostStatus(context.Background(), name)
		if err != nil {
			return c.jsonFail("host_status", rv(err))
		}
		h.Lockspaces = append(h.Lockspaces, HostStatusLockspace{Name: name, Hosts: hostStatusHosts(recs)})
		c.printHostStatus(h)
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
	c.printHostStatus(h)
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
	out := &RenewalJSON{JSONHead: jsonHead("renewal"), Lockspace: name, Renewals: []RenewalEntry{}}
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
	out := &InquireJSON{JSONHead: jsonHead("inquire"), Pid: t.Pid, ResCount: count, StateString: state,
		Resources: []InquireResource{}}
	res, _ := client.ParseState(state)
	for i := range res {
		out.Resources = append(out.Resources, InquireResource{Lockspace: res[i].LockspaceName, Name: res[i].Name,
			Disks: jsonDisks(res[i].Disks), Lver: res[i].LVer, Mode: modeOf(res[i].Flags)})
	}
	c.printJSON(out)
	return exitStatus(r)
}
