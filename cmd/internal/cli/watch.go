package cli

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/diskfmt"
)

// The progress an action draws on a terminal while the daemon works
// (docs/cli.md "Diagnostics on stderr"). It is computed here, from what
// the tool can read itself, once a second: the daemon is not asked for
// more than the action's own request.

// pollEvery is how often a watch reads again.
const pollEvery = time.Second

// watch runs step once a second in the background until the returned stop
// is called; stop then clears prog. With prog nil nothing runs.
func watch(prog *progress, step func(elapsed time.Duration)) (stop func()) {
	if prog == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		start := time.Now()
		t := time.NewTicker(pollEvery)
		defer t.Stop()
		for {
			step(time.Since(start))
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		prog.clear()
	}
}

// watchAddLockspace shows what add_lockspace of ls waits for: its phase
// and the seconds left, computed as the daemon's delta acquire plans it
// (delta.PlanAcquire) from the host_id's delta lease as first read; at
// that first read, when the lease is held by another host, a line that
// stays saying so and when the join fails if that host is alive; and, as
// soon as that lease is seen renewed by another host, that the host_id is
// in use. open reads the storage; ioTimeout is the tool's io_timeout.
func (c *clientRun) watchAddLockspace(prog *progress, ls client.Lockspace, ioTimeout int, noDelay bool,
	open func(string) (diskfmt.Device, error)) (stop func()) {
	if prog == nil || open == nil || ls.HostID == 0 || ls.Disk.Path == "" {
		return func() {}
	}
	var (
		first     []byte
		prev      []byte
		plan      delta.AcquirePlan
		inUseBy   string
		seenAt    time.Duration
		haveFirst bool
	)
	hostName := c.daemonHostName()
	return watch(prog, func(elapsed time.Duration) {
		raw, rec, ok := readHostLease(open, ls)
		if !ok {
			prog.show("add_lockspace %s: joining (%d s)", ls.Name, int(elapsed.Seconds()))
			return
		}
		if !haveFirst {
			first, prev, haveFirst = raw, raw, true
			plan = delta.PlanAcquire(&rec, hostName, delta.NewTiming(ioTimeout, 0))
			if noDelay {
				plan.Wait, plan.ShortDelay = 0, 0
			}
			if plan.Wait > 0 {
				// Held by another host when first read: whether it is
				// alive is known only after the watch, but what is at
				// stake is known now.
				name := diskfmt.NameString(rec.ResourceName[:])
				prog.note("add_lockspace %s: host_id %d was last held by %s (timestamp %d): if %s is alive, this join fails in about %d s",
					ls.Name, ls.HostID, name, rec.Timestamp, name, plan.Wait)
			}
		}
		s := int(elapsed.Seconds())
		owner := diskfmt.NameString(rec.ResourceName[:])
		if plan.Wait > 0 && s < plan.Wait && !bytes.Equal(raw, prev) && rec.Timestamp != 0 && owner != hostName {
			// Another host wrote its lease since the last read: it is
			// alive, and the host_id busy.
			inUseBy, seenAt = owner, elapsed
		}
		prev = raw
		switch {
		case inUseBy != "":
			prog.show("add_lockspace %s: host_id %d is in use by %s (renewed %d s ago): it will fail with SANLK_HOSTID_BUSY in %d s",
				ls.Name, ls.HostID, inUseBy, int((elapsed - seenAt).Seconds()), max(plan.Wait-s, 0))
		case s < plan.Wait:
			prog.show("add_lockspace %s: host_id %d was last held by %s: watching it for a live owner, %d s left",
				ls.Name, ls.HostID, diskfmt.NameString(first[104:104+diskfmt.NameLen]), plan.Wait+plan.ShortDelay-s)
		default:
			left := plan.Wait + plan.ShortDelay - s
			if left < 0 {
				left = 0
			}
			prog.show("add_lockspace %s: acquiring host_id %d, then checking that no other host wrote it: %d s left",
				ls.Name, ls.HostID, left)
		}
	})
}

// readHostLease reads the delta lease of ls's host_id from its storage:
// the raw record and its decoding.
func readHostLease(open func(string) (diskfmt.Device, error), ls client.Lockspace) ([]byte, diskfmt.Leader, bool) {
	dev, err := open(ls.Disk.Path)
	if err != nil {
		return nil, diskfmt.Leader{}, false
	}
	defer dev.Close()
	ctx, cancel := context.WithTimeout(context.Background(), pollEvery)
	defer cancel()
	ss := dev.SectorSize()
	head := make([]byte, max(ss, 512))
	if err := dev.ReadAt(ctx, head, int64(ls.Disk.Offset)); err != nil {
		return nil, diskfmt.Leader{}, false
	}
	if l, err := diskfmt.DecodeLeader(head); err == nil && (l.SectorSize == 512 || l.SectorSize == 4096) {
		ss = int(l.SectorSize)
	}
	buf := make([]byte, ss)
	if err := dev.ReadAt(ctx, buf, int64(ls.Disk.Offset)+diskfmt.DeltaSectorOffset(ls.HostID, ss)); err != nil {
		return nil, diskfmt.Leader{}, false
	}
	rec, err := diskfmt.DecodeLeader(buf)
	if err != nil {
		return nil, diskfmt.Leader{}, false
	}
	return buf[:200], rec, true
}

// daemonHostName is the daemon's our_host_name from its status record, or
// "" when it cannot be read.
func (c *clientRun) daemonHostName() string {
	if c.err != nil {
		return ""
	}
	recs, err := c.cl.Status(context.Background(), 0)
	if err != nil {
		return ""
	}
	for i := range recs {
		if recs[i].Type == client.StateDaemon {
			return keyValue(recs[i].Text, "our_host_name")
		}
	}
	return ""
}

// watchOwners shows on prog, while an acquire of res waits for the owner
// of a lease to be seen dead, which host holds it and the seconds until
// its host lease has timed out in the daemon's view: last_live (host_status)
// plus host_dead_seconds of its io_timeout, less the daemon's monotime.
func (c *clientRun) watchOwners(prog *progress, res []client.Resource) (stop func()) {
	if prog == nil || c.err != nil || len(res) == 0 {
		return func() {}
	}
	return watch(prog, func(elapsed time.Duration) {
		if elapsed < 2*pollEvery {
			return // an acquire that does not wait shows nothing
		}
		for i := range res {
			if line := c.ownerWait(res[i]); line != "" {
				prog.show("%s", line)
				return
			}
		}
		prog.show("acquire: waiting (%d s)", int(elapsed.Seconds()))
	})
}

// ownerWait describes the owner of r that an acquire waits for, or ""
// when r has no owner the daemon sees or the owner is our own host.
func (c *clientRun) ownerWait(r client.Resource) string {
	if len(r.Disks) == 0 {
		return ""
	}
	_, hosts, err := c.cl.ReadResourceOwners(context.Background(), &r)
	if err != nil || len(hosts) == 0 {
		return ""
	}
	owner := hosts[0].HostID
	if owner == c.ourHostID(r.LockspaceName) {
		// Our own ballot has just won: nothing is waited for.
		return ""
	}
	recs, err := c.cl.HostStatus(context.Background(), r.LockspaceName)
	if err != nil {
		return ""
	}
	for i := range recs {
		if uint64(recs[i].Data32) != owner {
			continue
		}
		text := recs[i].Text
		name, state := keyValue(text, "owner_name"), keyValue(text, "host_state")
		lastLive, ok1 := keyUint(text, "last_live")
		n, _ := keyUint(text, "io_timeout")
		mono, ok2 := c.daemonKey("monotime")
		if n == 0 {
			n = diskfmt.DefaultIOTimeout
		}
		who := fmt.Sprintf("acquire %s:%s: owner host_id %d", r.LockspaceName, r.Name, owner)
		if name != "" {
			who += " (" + name + ")"
		}
		if state != "" {
			who += " " + state
		}
		if !ok1 || !ok2 {
			return who
		}
		left := int64(lastLive) + int64(delta.HostDeadSeconds(int(n), delta.DefaultWatchdogFireTimeout)) - int64(mono)
		if left < 0 {
			left = 0
		}
		return fmt.Sprintf("%s renewed %d s ago; free in %d s", who, int64(mono)-int64(lastLive), left)
	}
	return fmt.Sprintf("acquire %s:%s: owner host_id %d", r.LockspaceName, r.Name, owner)
}

// ourHostID is the daemon's host_id in lockspace name, or 0 when it
// cannot be read.
func (c *clientRun) ourHostID(name string) uint64 {
	lss, err := c.cl.GetLockspaces(context.Background())
	if err != nil {
		return 0
	}
	for i := range lss {
		if lss[i].Name == name {
			return lss[i].HostID
		}
	}
	return 0
}

// daemonKey is a number of the daemon's status record text (status -D).
func (c *clientRun) daemonKey(key string) (uint64, bool) {
	recs, err := c.cl.Status(context.Background(), 0)
	if err != nil {
		return 0, false
	}
	for i := range recs {
		if recs[i].Type == client.StateDaemon {
			return keyUint(recs[i].Text, key)
		}
	}
	return 0, false
}

// keyValue is the value of key in a record text of key=value words.
func keyValue(text, key string) string {
	for _, kv := range strings.Fields(text) {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// keyUint is keyValue as a number.
func keyUint(text, key string) (uint64, bool) {
	v, err := strconv.ParseUint(keyValue(text, key), 10, 64)
	return v, err == nil
}
