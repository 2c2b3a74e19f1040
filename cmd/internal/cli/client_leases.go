package cli

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/lease"
)

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
