package cli

import (
	"fmt"
	"io"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/diskfmt"
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

// ---- align, events, config ----

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
