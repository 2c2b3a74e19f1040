package cli

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/diskfmt"
)

// clientRun runs one "sanlock client" action (docs/cli.md "Client
// actions"), made by ClientIO.connect. Every action prints its lines to
// out and returns either its result, whose sign decides the exit status,
// or the exit status itself (its xRun function says which).
type clientRun struct {
	out    io.Writer
	stderr io.Writer
	cl     *client.Client
	err    error // from client.Dial: reported by every call as rvDial
	debug  bool  // -D of the actions that print more with it

	// What diagnose reports after a failed action: why a connection to
	// the daemon failed, the last negative result of a call with the
	// daemon's cause when it gave one, and whether the action printed
	// its own explanation already.
	dialErr  error
	lastRv   int
	cause    string
	reported bool
	mu       sync.Mutex // dialErr: progress polls connect meanwhile

	// add_lockspace on a terminal: show the first line at once, and draw
	// progress while the request runs (watchJoin returns its stop).
	afterFirstLine func()
	watchJoin      func() (stop func())
}

// rvDial is what a call reports when the socket path cannot even be built
// (a run dir so long that sun_path overflows; libsanlock fails with -1).
const rvDial = -1

// rv is the result code of err (0 for nil).
func rv(err error) int { return client.ErrorCode(err) }

func (c *clientRun) printf(format string, a ...any) { fmt.Fprintf(c.out, format, a...) }

// call runs f unless Dial already failed, and keeps a negative result
// for diagnose.
func (c *clientRun) call(f func() error) int {
	if c.err != nil {
		return rvDial
	}
	r := rv(f())
	if r < 0 {
		c.lastRv = r
	}
	return r
}

// failed keeps err's result for diagnose and returns the exit status.
func (c *clientRun) failed(err error) int {
	r := rv(err)
	if r < 0 {
		c.lastRv = r
	}
	return exitStatus(r)
}

// ---- shutdown, lockspaces ----

func (c *clientRun) shutdown(forceArg uint32, wait int) int {
	c.printf("shutdown force %d wait %d\n", forceArg, wait)
	force := forceArg != 0
	r := c.call(func() error {
		if wait != 0 {
			return c.cl.ShutdownWait(context.Background(), force)
		}
		return c.cl.Shutdown(context.Background(), force)
	})
	c.printf("shutdown done %d\n", r)
	return r
}

func (c *clientRun) addLockspace(ls client.Lockspace, ioTimeout int, flags uint32) int {
	name, t := "add_lockspace", uint32(0)
	if ioTimeout != diskfmt.DefaultIOTimeout {
		name, t = "add_lockspace_timeout", uint32(ioTimeout)
		c.printf("%s %d\n", name, t)
	} else {
		c.printf("%s\n", name)
	}
	if c.afterFirstLine != nil {
		c.afterFirstLine()
	}
	stop := func() {}
	if c.watchJoin != nil && c.err == nil {
		stop = c.watchJoin()
	}
	r := c.call(func() error { return c.cl.AddLockspace(context.Background(), &ls, client.AddFlags(flags), t) })
	stop()
	c.printf("%s done %d\n", name, r)
	return r
}

func (c *clientRun) inqLockspace(ls client.Lockspace) int {
	return c.lockspaceCmd("inq_lockspace", ls, func(ls *client.Lockspace) error { return c.cl.InqLockspace(context.Background(), ls, 0) })
}

func (c *clientRun) remLockspace(ls client.Lockspace) int {
	return c.lockspaceCmd("rem_lockspace", ls, func(ls *client.Lockspace) error { return c.cl.RemLockspace(context.Background(), ls, 0) })
}

func (c *clientRun) lockspaceCmd(name string, ls client.Lockspace, f func(*client.Lockspace) error) int {
	c.printf("%s\n", name)
	r := c.call(func() error { return f(&ls) })
	c.printf("%s done %d\n", name, r)
	return r
}

// ---- init / read ----

func (c *clientRun) init(o *InitOptions) int {
	c.printf("init\n")
	r := int(client.RvEINVAL)
	switch {
	case o.Lockspace.Disk.Path != "":
		ls := o.Lockspace
		ls.Flags = o.SizeFlags
		r = c.call(func() error {
			return c.cl.WriteLockspace(context.Background(), &ls, uint32(o.MaxHosts), uint32(o.IOTimeout))
		})
	case o.Resource != nil && len(o.Resource.Disks) > 0:
		res := *o.Resource
		res.Flags |= o.SizeFlags
		var flags uint32
		if o.Clear {
			flags = client.WriteClear
		}
		r = c.call(func() error {
			return c.cl.WriteResource(context.Background(), &res, uint32(o.MaxHosts), uint32(o.NumHosts), flags)
		})
	}
	c.printf("init done %d\n", r)
	return r
}

func (c *clientRun) read(o *ReadOptions) int {
	switch {
	case o.Lockspace.Disk.Path != "":
		return c.readLockspace(o.Lockspace, o.SizeFlags)
	case o.Resource != nil && len(o.Resource.Disks) > 0:
		return c.readResource(*o.Resource, o.SizeFlags, o.Owners)
	}
	c.printf("read error %d\n", client.RvEINVAL)
	return client.RvEINVAL
}

func (c *clientRun) readLockspace(req client.Lockspace, sizeFlags uint32) int {
	req.Flags = sizeFlags
	var got *client.Lockspace
	var ioTimeout uint32
	r := c.call(func() (err error) { got, ioTimeout, err = c.cl.ReadLockspace(context.Background(), &req); return err })
	if r < 0 {
		c.printf("read error %d\n", r)
		return r
	}
	ls := *got
	if ls.Disk.Path == "" {
		ls.Disk = req.Disk
	}
	c.printf("s %s:%d:%s:%d\n", ls.Name, ls.HostID, ls.Disk.Path, ls.Disk.Offset)
	if c.debug {
		c.printf("io_timeout %d\n", ioTimeout)
		c.printf("sector_size %d\n", diskfmt.SectorFromFlags(ls.Flags))
		c.printf("align_size %d\n", diskfmt.AlignFromFlags(ls.Flags))
		// The tool of a 5.x release adds whether the host's delta lease
		// is NO_TIMEOUT; printed for a daemon that says it is 5.x, so
		// that the lines stay 3.8.5's with any other.
		if c.daemonAtLeast5() {
			nt := 0
			if ls.Flags&client.LSFNoTimeout != 0 {
				nt = 1
			}
			c.printf("no_timeout %d\n", nt)
		}
	}
	return 0
}

// daemonAtLeast5 says whether the daemon reports a 5.x or later version.
func (c *clientRun) daemonAtLeast5() bool {
	var v uint32
	if c.call(func() (err error) { v, _, err = c.cl.Version(context.Background()); return err }) < 0 {
		return false
	}
	return v>>24 >= 5
}

func (c *clientRun) readResource(req client.Resource, sizeFlags uint32, owners bool) int {
	req.Flags |= sizeFlags
	var got *client.Resource
	var hosts []client.Host
	r := c.call(func() (err error) {
		if owners {
			got, hosts, err = c.cl.ReadResourceOwners(context.Background(), &req)
		} else {
			got, err = c.cl.ReadResource(context.Background(), &req)
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
	if c.debug {
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

// ---- align, events, config ----

func (c *clientRun) align(d client.Disk) int {
	c.printf("align\n")
	var n int
	r := c.call(func() (err error) { n, err = c.cl.Align(context.Background(), &d); return err })
	if r == 0 {
		r = n
	}
	c.printf("align done %d\n", r)
	return r
}

func (c *clientRun) setHost(ls *client.Lockspace, h client.Host, flag string) int {
	c.printf("set_host %d %d %s\n", h.HostID, h.Generation, flag)
	r := c.call(func() error { return c.cl.SetHost(context.Background(), ls, client.SetHostDeadExt, 0, 0, h) })
	c.printf("set_host done %d\n", r)
	return r
}

func (c *clientRun) setEvent(name string, he client.HostEvent) int {
	c.printf("set_event %d %d event 0x%x data 0x%x\n", he.HostID, he.Generation, he.Event, he.Data)
	r := c.call(func() error { return c.cl.SetEvent(context.Background(), name, he, 0) })
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

func (c *clientRun) setConfig(name string, v uint32) int {
	c.printf("set_config %s %d\n", name, v)
	r := c.call(func() error { return c.cl.SetConfig(context.Background(), name, v) })
	c.printf("set_config done %d\n", r)
	return r
}

// ---- resource index ----

// rindexReq is what the resource index actions send; each uses some of
// it.
type rindexReq struct {
	rindex             client.RIndex
	entry              rentryArg
	sizeFlags          uint32
	maxHosts, numHosts int
	remove             bool
}

func (c *clientRun) rindexCmd(action string, o rindexReq) int {
	ri := o.rindex
	e := o.entry
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
				ri.Flags = o.sizeFlags
				return c.cl.FormatRIndex(context.Background(), &ri, 0)
			case "rebuild":
				return c.cl.RebuildRIndex(context.Background(), &ri, 0)
			case "create":
				got, err = c.cl.CreateResource(context.Background(), &ri, 0, re, uint32(o.maxHosts), uint32(o.numHosts))
			case "delete":
				err = c.cl.DeleteResource(context.Background(), &ri, 0, re)
			case "lookup":
				got, err = c.cl.LookupRIndex(context.Background(), &ri, 0, re)
			case "update":
				flags := uint32(client.RXUpAdd)
				if o.remove {
					flags = client.RXUpRem
				}
				_, err = c.cl.UpdateRIndex(context.Background(), &ri, flags, re)
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
	if r := c.call(func() (err error) { v, proto, err = c.cl.Version(context.Background()); return err }); r < 0 {
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
