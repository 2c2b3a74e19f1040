package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/gosanlock/gosanlock/client"
)

// statusLine is one record of STATUS: its line and key list. A record
// whose line is empty is not printed (a type the tool does not know);
// debugOnly lines (the worker and resource thread records of 3.9.5 and
// 5.1.1 daemons) are printed with -D only.
type statusLine struct {
	rec       *client.StateRecord
	line      string
	debugOnly bool
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
	case client.StateWorker:
		return fmt.Sprintf("worker %d", rec.Data32)
	case client.StateResourceThread:
		return "resource_thread"
	}
	return ""
}

// printRecord prints a line and, with -D, the record's key=value pairs.
func (c *clientRun) printRecord(l statusLine) {
	if l.line == "" || (l.debugOnly && !c.debug) {
		return
	}
	c.printf("%s\n", l.line)
	if c.debug {
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

func (c *clientRun) status(sortBy byte) int {
	if c.err != nil {
		return 1
	}
	recs, err := c.cl.Status(context.Background(), 0)
	if err != nil && len(recs) == 0 {
		return 1
	}
	lines := make([]statusLine, 0, len(recs))
	for i := range recs {
		t := recs[i].Type
		lines = append(lines, statusLine{rec: &recs[i], line: statusText(&recs[i]),
			debugOnly: t == client.StateWorker || t == client.StateResourceThread})
	}
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
// match it, then, after a "-" line, the records left: the unmatched
// resources and the records of other types (worker and resource thread
// records of a 3.9.5 or 5.1.1 daemon, printed with -D only; types the tool
// does not know are not printed, but still make the "-" line, as every C
// tool does).
func (c *clientRun) statusGrouped(lines, groups []statusLine, match func(g, r statusLine) bool) {
	var rest []statusLine
	for _, l := range lines {
		switch l.rec.Type {
		case client.StateDaemon, client.StateClient, client.StateLockspace:
		default:
			rest = append(rest, l)
		}
	}
	used := make([]bool, len(rest))
	for _, g := range groups {
		c.printRecord(g)
		for i, r := range rest {
			if !used[i] && isType(r, client.StateResource) && match(g, r) {
				used[i] = true
				c.printRecord(r)
			}
		}
	}
	dash := false
	for i, r := range rest {
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

func (c *clientRun) printHosts(recs []client.StateRecord) {
	for i := range recs {
		c.printf("%d timestamp %d\n", recs[i].Data32, recs[i].Data64)
		if c.debug {
			c.printKeys(recs[i].Text)
		}
	}
}

func (c *clientRun) hostStatus(name string) int {
	if c.err != nil {
		return 1
	}
	if name != "" {
		recs, err := c.cl.HostStatus(context.Background(), name)
		if err != nil {
			return c.failed(err)
		}
		c.printHosts(recs)
		return 0
	}
	spaces, err := c.cl.GetLockspaces(context.Background())
	if err != nil {
		return 1
	}
	for _, ls := range spaces {
		c.printf("lockspace %s\n", ls.Name)
		recs, err := c.cl.HostStatus(context.Background(), ls.Name)
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

func (c *clientRun) gets(getHosts bool) int {
	var spaces []client.Lockspace
	r := c.call(func() (err error) { spaces, err = c.cl.GetLockspaces(context.Background()); return err })
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
		if ls.Flags&client.LSFNoTimeout != 0 {
			flags += "NO_TIMEOUT " // 5.1.1's word
		}
		c.printf("s %s:%d:%s:%d %s\n", ls.Name, ls.HostID, ls.Disk.Path, ls.Disk.Offset, flags)
		if !getHosts {
			continue
		}
		hosts, err := c.cl.GetHosts(context.Background(), ls.Name, 0)
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

// renewal prints the daemon's renewal history of a lockspace, one record
// text per line. On a terminal (tty) each line also gets a bar of the
// renewal's read+write time against the lockspace's io_timeout (see
// renewalBar); into a pipe or a file the lines are 3.8.5's.
func (c *clientRun) renewal(name string, tty bool) int {
	if name == "" || c.err != nil {
		return 1
	}
	recs, err := c.cl.Renewal(context.Background(), name)
	if err != nil {
		return c.failed(err)
	}
	budget := uint64(0)
	if tty {
		budget = c.ioTimeoutOf(name)
	}
	for i := range recs {
		if !tty {
			c.printf("%s\n", recs[i].Text)
			continue
		}
		k := parseKeys(recs[i].Text)
		c.printf("%s  %s\n", recs[i].Text, renewalBar(k.int("read_ms"), k.int("write_ms"), k.int("next_timeouts")+k.int("next_errors"), budget))
	}
	return 0
}

// ioTimeoutOf is the io_timeout of lockspace name from the daemon's
// LOCKSPACE record (0 when the daemon does not say).
func (c *clientRun) ioTimeoutOf(name string) uint64 {
	recs, _ := c.cl.Status(context.Background(), 0)
	for i := range recs {
		if recs[i].Type == client.StateLockspace && recs[i].Lockspace != nil && recs[i].Lockspace.Name == name {
			return parseKeys(recs[i].Text).num("io_timeout")
		}
	}
	return 0
}

// barCells is the width of a renewal bar; each cell is drawn in eighths.
const barCells = 20

// renewalBar draws read+write milliseconds against the io_timeout budget
// (seconds): "|█▍        |  14 ms of 10 s  0.1%". A renewal that took any
// time shows at least one eighth; one over budget fills the bar and says
// "over"; failures counted after it (timeouts and errors) are named. With
// no budget known only the milliseconds are shown.
func renewalBar(readMS, writeMS, failures int64, budgetS uint64) string {
	ms := max(readMS, 0) + max(writeMS, 0)
	var b strings.Builder
	if budgetS > 0 {
		budget := int64(budgetS) * 1000
		eighths := min(ms*barCells*8/budget, barCells*8)
		if ms > 0 && eighths == 0 {
			eighths = 1
		}
		b.WriteString("|")
		b.WriteString(strings.Repeat("█", int(eighths/8)))
		cells := int(eighths / 8)
		if r := eighths % 8; r > 0 {
			b.WriteString(string([]rune("▏▎▍▌▋▊▉")[r-1]))
			cells++
		}
		b.WriteString(strings.Repeat(" ", barCells-cells))
		fmt.Fprintf(&b, "| %5d ms of %d s %5.1f%%", ms, budgetS, float64(ms)*100/float64(budget))
		if ms > budget {
			b.WriteString(" over")
		}
	} else {
		fmt.Fprintf(&b, "%5d ms", ms)
	}
	if failures > 0 {
		fmt.Fprintf(&b, " then %d failed", failures)
	}
	return b.String()
}

func (c *clientRun) logDump() int {
	if c.err != nil {
		return 1
	}
	data, err := c.cl.LogDump(context.Background())
	if err != nil {
		return 1
	}
	c.out.Write(data)
	c.printf("\n")
	return exitStatus(len(data))
}
