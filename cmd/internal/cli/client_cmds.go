package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/lease"
)

// clientRun runs one "sanlock client" action (docs/cli.md "Client
// actions"). Every action prints its lines to out and returns either its
// result, whose sign decides the exit status, or the exit status itself
// (clientActionList says which).
type clientRun struct {
	o      *options
	env    *ClientOptions
	out    io.Writer
	stderr io.Writer
	cl     *client.Client
	err    error // from client.Dial: reported by every call as rvDial
}

// rvDial is what a call reports when the socket path cannot even be built
// (a run dir so long that sun_path overflows; libsanlock fails with -1).
const rvDial = -1

// rv is the result code of err (0 for nil).
func rv(err error) int { return client.ErrorCode(err) }

func (c *clientRun) printf(format string, a ...any) { fmt.Fprintf(c.out, format, a...) }

// call runs f unless Dial already failed.
func (c *clientRun) call(f func() error) int {
	if c.err != nil {
		return rvDial
	}
	return rv(f())
}

// ---- status ----

// statusLine is one printed record of STATUS: its line and key list.
type statusLine struct {
	rec  *client.StateRecord
	line string
}

// listSuffix is the " ADD" / " REM" / " ORPHAN" mark the tool adds after s
// and r lines, found by substring in the record text (docs/protocol.md "Record texts").
func listSuffix(text string, orphan bool) string {
	switch {
	case strings.Contains(text, "list=add"):
		return " ADD"
	case strings.Contains(text, "list=rem"):
		return " REM"
	case orphan && strings.Contains(text, "list=orphan"):
		return " ORPHAN"
	}
	return ""
}

func statusText(rec *client.StateRecord) string {
	switch rec.Type {
	case client.StateDaemon:
		return "daemon " + rec.Name
	case client.StateClient:
		return fmt.Sprintf("p %d %s", int32(rec.Data32), rec.Name)
	case client.StateLockspace:
		ls := client.Lockspace{}
		if rec.Lockspace != nil {
			ls = *rec.Lockspace
		}
		return "s " + client.LockspaceString(&ls) + listSuffix(rec.Text, false)
	case client.StateResource:
		r := client.Resource{}
		if rec.Resource != nil {
			r = *rec.Resource
		}
		r.LVer = rec.Data64 // the held version; the struct's lver is stale
		return fmt.Sprintf("r %s p %d%s", client.ResourceString(&r), int32(rec.Data32), listSuffix(rec.Text, true))
	}
	return ""
}

// printRecord prints a line and, with -D, the record's key=value pairs.
func (c *clientRun) printRecord(l statusLine) {
	c.printf("%s\n", l.line)
	if c.o.debug {
		c.printKeys(l.rec.Text)
	}
}

// printKeys prints a key list one pair per line, indented by 4 spaces.
func (c *clientRun) printKeys(text string) {
	for _, kv := range strings.Split(text, " ") {
		if kv != "" {
			c.printf("    %s\n", kv)
		}
	}
}

// maxSort is the most records the tool sorts for -o p / -o s.
const maxSort = 1024

func (c *clientRun) status() int {
	if c.err != nil {
		return 1
	}
	recs, err := c.cl.Status(0)
	if err != nil && len(recs) == 0 {
		return 1
	}
	lines := make([]statusLine, 0, len(recs))
	for i := range recs {
		if t := statusText(&recs[i]); t != "" {
			lines = append(lines, statusLine{rec: &recs[i], line: t})
		}
	}
	sortBy := c.o.sortArg
	if (sortBy == 'p' || sortBy == 's') && len(lines) > maxSort {
		c.printf("cannot sort over %d\n", maxSort)
		sortBy = 0
	}
	switch sortBy {
	case 'p':
		c.statusByPid(lines)
	case 's':
		c.statusBySpace(lines)
	default:
		for _, l := range lines {
			c.printRecord(l)
		}
	}
	return 0
}

func isType(l statusLine, t uint32) bool { return l.rec.Type == t }

func pidOf(l statusLine) int32 { return int32(l.rec.Data32) }

// statusHead prints the daemon record and the clients with pid -1; with
// allClients also the other clients. It returns the clients not printed.
func (c *clientRun) statusHead(lines []statusLine, allClients bool) []statusLine {
	var rest []statusLine
	for _, l := range lines {
		if isType(l, client.StateDaemon) {
			c.printRecord(l)
		}
	}
	for _, l := range lines {
		if isType(l, client.StateClient) {
			if pidOf(l) == -1 {
				c.printRecord(l)
			} else {
				rest = append(rest, l)
			}
		}
	}
	if allClients {
		for _, l := range rest {
			c.printRecord(l)
		}
	}
	return rest
}

// statusGrouped prints each group line followed by the resource lines that
// match it, then the unmatched resource lines after a "-" line.
func (c *clientRun) statusGrouped(lines, groups []statusLine, match func(g, r statusLine) bool) {
	var res []statusLine
	for _, l := range lines {
		if isType(l, client.StateResource) {
			res = append(res, l)
		}
	}
	used := make([]bool, len(res))
	for _, g := range groups {
		c.printRecord(g)
		for i, r := range res {
			if !used[i] && match(g, r) {
				used[i] = true
				c.printRecord(r)
			}
		}
	}
	dash := false
	for i, r := range res {
		if used[i] {
			continue
		}
		if !dash {
			c.printf("-\n")
			dash = true
		}
		c.printRecord(r)
	}
}

func (c *clientRun) statusByPid(lines []statusLine) {
	clients := c.statusHead(lines, false)
	for _, l := range lines {
		if isType(l, client.StateLockspace) {
			c.printRecord(l)
		}
	}
	c.statusGrouped(lines, clients, func(g, r statusLine) bool { return pidOf(g) == pidOf(r) })
}

func (c *clientRun) statusBySpace(lines []statusLine) {
	c.statusHead(lines, true)
	var spaces []statusLine
	for _, l := range lines {
		if isType(l, client.StateLockspace) {
			spaces = append(spaces, l)
		}
	}
	c.statusGrouped(lines, spaces, func(g, r statusLine) bool {
		return g.rec.Lockspace != nil && r.rec.Resource != nil &&
			g.rec.Lockspace.Name == r.rec.Resource.LockspaceName
	})
}

// ---- host_status, gets, renewal, log_dump ----

func (c *clientRun) printHosts(recs []client.StateRecord) {
	for i := range recs {
		c.printf("%d timestamp %d\n", recs[i].Data32, recs[i].Data64)
		if c.o.debug {
			c.printKeys(recs[i].Text)
		}
	}
}

func (c *clientRun) hostStatus() int {
	if c.err != nil {
		return 1
	}
	if name := c.o.lockspace.Name; name != "" {
		recs, err := c.cl.HostStatus(name)
		if err != nil {
			return exitStatus(rv(err))
		}
		c.printHosts(recs)
		return 0
	}
	spaces, err := c.cl.GetLockspaces()
	if err != nil {
		return 1
	}
	for _, ls := range spaces {
		c.printf("lockspace %s\n", ls.Name)
		recs, err := c.cl.HostStatus(ls.Name)
		if err == nil {
			c.printHosts(recs)
		}
	}
	return 0
}

// hostState names the state in the low bits of sanlk_host.flags.
func hostState(flags uint32) string {
	switch flags & client.HostMask {
	case client.HostFree:
		return "FREE"
	case client.HostLive:
		return "LIVE"
	case client.HostFail:
		return "FAIL"
	case client.HostDead:
		return "DEAD"
	case client.HostUnknown:
		return "UNKNOWN"
	}
	return "ERROR"
}

func (c *clientRun) gets() int {
	var spaces []client.Lockspace
	r := c.call(func() (err error) { spaces, err = c.cl.GetLockspaces(); return err })
	if r < 0 {
		c.printf("gets error %d\n", r)
		return 1
	}
	for _, ls := range spaces {
		flags := ""
		switch {
		case ls.Flags&client.LSFAdd != 0:
			flags = "ADD "
		case ls.Flags&client.LSFRem != 0:
			flags = "REM "
		}
		c.printf("s %s:%d:%s:%d %s\n", ls.Name, ls.HostID, ls.Disk.Path, ls.Disk.Offset, flags)
		if c.o.getHosts == 0 {
			continue
		}
		hosts, err := c.cl.GetHosts(ls.Name, 0)
		switch hr := rv(err); {
		case hr == client.RvEAGAIN:
			c.printf("hosts not ready\n")
		case hr < 0:
			c.printf("hosts error %d\n", hr)
		default:
			for _, h := range hosts {
				c.printf("h %d gen %d timestamp %d %s\n", h.HostID, h.Generation, h.Timestamp, hostState(h.Flags))
			}
		}
	}
	return 0
}

func (c *clientRun) renewal() int {
	name := c.o.lockspace.Name
	if name == "" || c.err != nil {
		return 1
	}
	recs, err := c.cl.Renewal(name)
	if err != nil {
		return exitStatus(rv(err))
	}
	for i := range recs {
		c.printf("%s\n", recs[i].Text)
	}
	return 0
}

func (c *clientRun) logDump() int {
	if c.err != nil {
		return 1
	}
	data, err := c.cl.LogDump()
	if err != nil {
		return 1
	}
	c.out.Write(data)
	c.printf("\n")
	return exitStatus(len(data))
}

// ---- shutdown, lockspaces ----

func (c *clientRun) shutdown() int {
	c.printf("shutdown force %d wait %d\n", c.o.force, c.o.wait)
	force := c.o.force != 0
	r := c.call(func() error {
		if c.o.wait != 0 {
			return c.cl.ShutdownWait(force)
		}
		return c.cl.Shutdown(force)
	})
	c.printf("shutdown done %d\n", r)
	return r
}

func (c *clientRun) addLockspace() int {
	ls := c.o.lockspace
	if t := c.o.cfg.IOTimeout; t != diskfmt.DefaultIOTimeout {
		c.printf("add_lockspace_timeout %d\n", t)
		r := c.call(func() error { return c.cl.AddLockspace(&ls, 0, uint32(t)) })
		c.printf("add_lockspace_timeout done %d\n", r)
		return r
	}
	return c.lockspaceCmd("add_lockspace", func(ls *client.Lockspace) error { return c.cl.AddLockspace(ls, 0, 0) })
}

func (c *clientRun) inqLockspace() int {
	return c.lockspaceCmd("inq_lockspace", func(ls *client.Lockspace) error { return c.cl.InqLockspace(ls, 0) })
}

func (c *clientRun) remLockspace() int {
	return c.lockspaceCmd("rem_lockspace", func(ls *client.Lockspace) error { return c.cl.RemLockspace(ls, 0) })
}

func (c *clientRun) lockspaceCmd(name string, f func(*client.Lockspace) error) int {
	c.printf("%s\n", name)
	ls := c.o.lockspace
	r := c.call(func() error { return f(&ls) })
	c.printf("%s done %d\n", name, r)
	return r
}

// ---- init / read ----

func (c *clientRun) init() int {
	c.printf("init\n")
	o := c.o
	r := int(client.RvEINVAL)
	switch {
	case o.lockspace.Disk.Path != "":
		ls := o.lockspace
		ls.Flags = o.sizeFlags()
		r = c.call(func() error { return c.cl.WriteLockspace(&ls, uint32(o.maxHosts), uint32(o.cfg.IOTimeout)) })
	case len(o.resources) > 0 && len(o.resources[0].Disks) > 0:
		res := o.resources[0]
		res.Flags |= o.sizeFlags()
		var flags uint32
		if o.clear {
			flags = client.WriteClear
		}
		r = c.call(func() error {
			return c.cl.WriteResource(&res, uint32(o.maxHosts), uint32(o.numHosts), flags)
		})
	}
	c.printf("init done %d\n", r)
	return r
}

func (c *clientRun) read() int {
	o := c.o
	switch {
	case o.lockspace.Disk.Path != "":
		return c.readLockspace()
	case len(o.resources) > 0 && len(o.resources[0].Disks) > 0:
		return c.readResource()
	}
	c.printf("read error %d\n", client.RvEINVAL)
	return client.RvEINVAL
}

func (c *clientRun) readLockspace() int {
	req := c.o.lockspace
	req.Flags = c.o.sizeFlags()
	var got *client.Lockspace
	var ioTimeout uint32
	r := c.call(func() (err error) { got, ioTimeout, err = c.cl.ReadLockspace(&req); return err })
	if r < 0 {
		c.printf("read error %d\n", r)
		return r
	}
	ls := *got
	if ls.Disk.Path == "" {
		ls.Disk = req.Disk
	}
	c.printf("s %s:%d:%s:%d\n", ls.Name, ls.HostID, ls.Disk.Path, ls.Disk.Offset)
	if c.o.debug {
		c.printf("io_timeout %d\n", ioTimeout)
		c.printf("sector_size %d\n", diskfmt.SectorFromFlags(ls.Flags))
		c.printf("align_size %d\n", diskfmt.AlignFromFlags(ls.Flags))
	}
	return 0
}

func (c *clientRun) readResource() int {
	req := c.o.resources[0]
	req.Flags |= c.o.sizeFlags()
	var got *client.Resource
	var hosts []client.Host
	r := c.call(func() (err error) {
		if c.o.getHosts != 0 {
			got, hosts, err = c.cl.ReadResourceOwners(&req)
		} else {
			got, err = c.cl.ReadResource(&req)
		}
		return err
	})
	if r < 0 {
		c.printf("read error %d\n", r)
		return r
	}
	// The reply carries the resource without its disks; the tool prints
	// it with the disks it asked about.
	res := *got
	res.Disks = req.Disks
	c.printf("r %s\n", client.ResourceString(&res))
	if c.o.debug {
		c.printf("sector_size %d\n", diskfmt.SectorFromFlags(res.Flags))
		c.printf("align_size %d\n", diskfmt.AlignFromFlags(res.Flags))
	}
	for _, h := range hosts {
		// Shared holders carry no timestamp; the exclusive owner of a
		// lease that also has shared holders does, and it is printed.
		if res.Flags&client.ResShared != 0 && h.Timestamp == 0 {
			c.printf("h %d gen %d\n", h.HostID, h.Generation)
		} else {
			c.printf("h %d gen %d timestamp %d\n", h.HostID, h.Generation, h.Timestamp)
		}
	}
	return 0
}

// ---- leases of a registered process ----

// acquireArgs returns the resources and flags of acquire / command.
func (c *clientRun) acquireArgs() ([]client.Resource, uint32) {
	o := c.o
	res := make([]client.Resource, len(o.resources))
	copy(res, o.resources)
	for i := range res {
		if o.persistent != 0 {
			res[i].Flags |= client.ResPersistent
		}
		if o.numHosts != 0 {
			res[i].Flags |= client.ResNumHosts
			res[i].Data32 = uint32(o.numHosts)
		}
	}
	var flags uint32
	if o.orphan != 0 {
		flags |= client.AcquireOrphan
	}
	return res, flags
}

func (c *clientRun) acquire() int {
	c.printf("acquire pid %d\n", c.o.pid)
	res, flags := c.acquireArgs()
	var r int
	if c.o.acquireWait > 0 {
		r = c.acquireWait(res, flags)
	} else {
		r = c.call(func() error { return c.cl.Acquire(c.o.pid, res, flags, nil) })
	}
	c.printf("acquire done %d\n", r)
	return r
}

// acquireWait is client acquire --wait D (our extension): retry while the
// lease is held elsewhere or a ballot was lost (the codes lease.Classify
// calls ErrLocked), with jittered backoff, until D has passed; any other
// result ends it at once. Each attempt asks the daemon not to wait for a
// dead owner (OWNER_NOWAIT), so the deadline holds; a dead owner's lease is
// taken over by the first attempt after its host lease timed out. The
// output is 3.8.5's: "acquire done" gives the last attempt's result.
func (c *clientRun) acquireWait(res []client.Resource, flags uint32) int {
	ctx, cancel := context.WithTimeout(context.Background(), c.o.acquireWait)
	defer cancel()
	backoff := 50 * time.Millisecond
	for {
		r := c.call(func() error {
			return c.cl.WithContext(ctx).Acquire(c.o.pid, res, flags|client.AcquireOwnerNowait, nil)
		})
		if r >= 0 || lease.Classify("acquire", r) != lease.ErrLocked {
			return r
		}
		d := backoff/2 + rand.N(backoff/2+1)
		if dl, _ := ctx.Deadline(); time.Until(dl) < d {
			return r
		}
		if c.o.debug {
			fmt.Fprintf(c.stderr, "acquire %d, retry in %v\n", r, d.Round(time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return r
		case <-time.After(d):
		}
		if backoff < 2*time.Second {
			backoff *= 2
		}
	}
}

func (c *clientRun) convert() int {
	c.printf("convert pid %d\n", c.o.pid)
	r := int(client.RvEINVAL)
	if len(c.o.resources) > 0 {
		res := c.o.resources[0]
		r = c.call(func() error { return c.cl.Convert(c.o.pid, &res, 0) })
	}
	c.printf("convert done %d\n", r)
	return r
}

func (c *clientRun) release() int {
	o := c.o
	c.printf("release pid %d\n", o.pid)
	var res []client.Resource
	var flags uint32
	switch {
	case o.all != 0:
		flags = client.RelAll
	case o.orphan != 0:
		flags = client.RelOrphan
		if len(o.resources) > 0 {
			res = o.resources[:1]
		} else {
			res = []client.Resource{{LockspaceName: o.lockspace.Name}}
		}
	default:
		res = o.resources
	}
	var n int
	r := c.call(func() (err error) { n, err = c.cl.Release(o.pid, res, flags); return err })
	if r == 0 {
		r = n
	}
	c.printf("release done %d\n", r)
	return r
}

func (c *clientRun) inquire() int {
	c.printf("inquire pid %d\n", c.o.pid)
	var state string
	var count int
	r := c.call(func() (err error) { state, count, err = c.cl.Inquire(c.o.pid); return err })
	c.printf("inquire done %d res_count %d\n", r, count)
	if r < 0 {
		return r
	}
	if state == "" {
		// The C tool prints a NULL string (and crashes on -D).
		c.printf("\"(null)\"\n")
		return r
	}
	c.printf("%q\n", state)
	if !c.o.debug {
		return r
	}
	res, err := client.ParseState(state)
	c.printf("\nstate_to_args done %d res_count %d\n", rv(err), len(res))
	for i := range res {
		p, off := "", uint64(0)
		if len(res[i].Disks) > 0 {
			p, off = res[i].Disks[0].Path, res[i].Disks[0].Offset
		}
		c.printf("\"%s:%s:%s:%d:%d\"\n", res[i].LockspaceName, res[i].Name, p, off, res[i].LVer)
	}
	back, err := client.FormatState(res)
	c.printf("\nargs_to_state done %d\n\"%s\"\n", rv(err), back)
	return r
}

// ---- request, examine, align, events, config ----

func (c *clientRun) request() int {
	c.printf("request\n")
	r := int(client.RvEINVAL)
	if len(c.o.resources) > 0 {
		res := c.o.resources[0]
		r = c.call(func() error { return c.cl.Request(&res, 0, c.o.force) })
	}
	c.printf("request done %d\n", r)
	return r
}

func (c *clientRun) examine() int {
	c.printf("examine\n")
	r := int(client.RvEINVAL)
	switch {
	case len(c.o.resources) > 0:
		res := c.o.resources[0]
		r = c.call(func() error { return c.cl.ExamineResource(&res) })
	case c.o.lockspace.Disk.Path != "":
		ls := c.o.lockspace
		r = c.call(func() error { return c.cl.ExamineLockspace(&ls) })
	}
	c.printf("examine done %d\n", r)
	return r
}

func (c *clientRun) align() int {
	c.printf("align\n")
	d := c.o.lockspace.Disk
	var n int
	r := c.call(func() (err error) { n, err = c.cl.Align(&d); return err })
	if r == 0 {
		r = n
	}
	c.printf("align done %d\n", r)
	return r
}

func (c *clientRun) setEvent() int {
	o := c.o
	ev, _ := strtoull(o.eventStr, 0)
	he := client.HostEvent{HostID: o.hostID, Generation: o.generation, Event: ev, Data: o.data}
	c.printf("set_event %d %d event 0x%x data 0x%x\n", he.HostID, he.Generation, he.Event, he.Data)
	r := c.call(func() error { return c.cl.SetEvent(o.lockspace.Name, he, 0) })
	c.printf("set_event done %d\n", r)
	return r
}

// configValue maps -O / -u to a SET_CONFIG value; -O wins. As sanlock
// 3.8.5 does, any nonzero value (after atoi) counts as 1: `-u 7` sets
// USED, `-u abc` (atoi 0) clears it.
func (o *options) configValue() uint32 {
	switch {
	case o.orphanSet && o.orphan != 0:
		return client.ConfigUsedByOrphans
	case o.orphanSet:
		return client.ConfigUnusedByOrphans
	case o.usedSet && o.used != 0:
		return client.ConfigUsed
	case o.usedSet:
		return client.ConfigUnused
	}
	return 0
}

func (c *clientRun) setConfig() int {
	name, v := c.o.lockspace.Name, c.o.configValue()
	c.printf("set_config %s %d\n", name, v)
	r := c.call(func() error { return c.cl.SetConfig(name, v) })
	c.printf("set_config done %d\n", r)
	return r
}

// ---- resource index ----

// rindexAction is one of the resource index actions.
func rindexAction(action string) func(*clientRun) int {
	return func(c *clientRun) int { return c.rindexCmd(action) }
}

func (c *clientRun) rindexCmd(action string) int {
	o := c.o
	ri := o.rindex
	e := parseRentry(o.eventStr)
	re := &client.REntry{Name: e.Name, Offset: e.Offset}
	done := action
	switch action {
	case "create":
		done = "create_resource"
	case "delete":
		done = "delete_resource"
	}
	var got *client.REntry
	r := int(client.RvEINVAL)
	if ri.Disk.Path != "" {
		r = c.call(func() (err error) {
			switch action {
			case "format":
				ri.Flags = o.sizeFlags()
				return c.cl.FormatRIndex(&ri, 0)
			case "rebuild":
				return c.cl.RebuildRIndex(&ri, 0)
			case "create":
				got, err = c.cl.CreateResource(&ri, 0, re, uint32(o.maxHosts), uint32(o.numHosts))
			case "delete":
				err = c.cl.DeleteResource(&ri, 0, re)
			case "lookup":
				got, err = c.cl.LookupRIndex(&ri, 0, re)
			case "update":
				flags := uint32(client.RXUpAdd)
				if o.clear {
					flags = client.RXUpRem
				}
				_, err = c.cl.UpdateRIndex(&ri, flags, re)
			}
			return err
		})
	}
	c.printf("%s done %d\n", done, r)
	if r == 0 && got != nil {
		switch action {
		case "create":
			c.printf("offset %d\n", got.Offset)
		case "lookup":
			name := got.Name
			if name == "" {
				name = "-"
			}
			c.printf("name %s offset %d\n", name, got.Offset)
		}
	}
	return r
}

// ---- version ----

func (c *clientRun) version() {
	var v, proto uint32
	if r := c.call(func() (err error) { v, proto, err = c.cl.Version(); return err }); r < 0 {
		c.printf("daemon version error %d\n", r)
		v, proto = 0, 0
	}
	cv := client.DaemonVersion
	c.printf("client version %s (0x%08x)\n", versionString(cv), cv)
	c.printf("daemon version %s (0x%08x)\n", versionString(v), v)
	c.printf("client socket protocol %d.%d\n", client.ProtoVersion>>16, client.ProtoVersion&0xffff)
	c.printf("daemon socket protocol %d.%d\n", proto>>16, proto&0xffff)
}

// versionString renders major<<24 | minor<<16 | patch<<8 | build.
func versionString(v uint32) string {
	return fmt.Sprintf("%d.%d.%d", v>>24, v>>16&0xff, v>>8&0xff)
}

// ---- command ----

// command registers, acquires the -r leases on the registered connection
// and execs the -c program with that connection inherited, so the leases
// live as long as the program (docs/cli.md "command").
func (c *clientRun) command() int {
	o := c.o
	// A terminal gets each line as it is written; into a pipe or a file
	// the lines stay buffered, so a successful exec drops them (sanlock
	// 3.8.5's stdio does the same) and only a failure shows them.
	printf := c.printf
	if c.env.OutTTY {
		printf = func(format string, a ...any) { c.printf(format, a...); c.env.Out.Flush() }
	}
	printf("register\n")
	var reg *client.Reg
	r := c.call(func() (err error) { reg, err = c.cl.Register(); return err })
	fd := -1
	if r == 0 {
		fd, r = regFD(reg)
	}
	if r < 0 {
		printf("register done %d\n", r)
		return 0
	}
	printf("register done %d\n", fd)
	printf("acquire fd %d\n", fd)
	res, flags := c.acquireArgs()
	r = rv(reg.Acquire(res, flags, nil))
	printf("acquire done %d\n", r)
	if r < 0 {
		return 1
	}
	if o.command == "" {
		select {} // hold the leases until killed
	}
	argv := append([]string{o.command}, o.commandArgs...)
	err := c.env.Exec(o.command, argv, os.Environ())
	fmt.Fprintf(c.stderr, "execv failed: %s\n", errText(err))
	return 0
}

// regFD returns the registered connection's descriptor, made inheritable
// across exec.
func regFD(reg *client.Reg) (int, int) {
	rc, err := reg.Conn().SyscallConn()
	if err != nil {
		return -1, rv(err)
	}
	fd := -1
	var ferr error
	if err := rc.Control(func(p uintptr) {
		fd = int(p)
		_, ferr = unix.FcntlInt(p, unix.F_SETFD, 0)
	}); err != nil {
		return -1, rv(err)
	}
	if ferr != nil {
		return -1, rv(ferr)
	}
	return fd, 0
}

// errText is strerror's text for an errno error.
func errText(err error) string {
	var en syscall.Errno
	if errors.As(err, &en) {
		s := en.Error()
		if s != "" {
			return strings.ToUpper(s[:1]) + s[1:]
		}
	}
	return err.Error()
}
