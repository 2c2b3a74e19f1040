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

// request returns the resources and flags of acquire / command.
func (o LeaseArgs) request() ([]client.Resource, uint32) {
	res := make([]client.Resource, len(o.Resources))
	copy(res, o.Resources)
	for i := range res {
		if o.Persistent {
			res[i].Flags |= client.ResPersistent
		}
		if o.NumHosts != 0 {
			res[i].Flags |= client.ResNumHosts
			res[i].Data32 = uint32(o.NumHosts)
		}
	}
	var flags uint32
	if o.Orphan {
		flags |= client.AcquireOrphan
	}
	return res, flags
}

func (c *clientRun) acquire(o *AcquireOptions) int {
	c.printf("acquire %s\n", o.Target)
	res, flags := o.request()
	flags |= o.Target.flags()
	var r int
	if o.Wait > 0 {
		r = c.acquireWait(o.Target.id(), res, flags, o.Wait)
	} else {
		r = c.call(func() error {
			return c.cl.Acquire(context.Background(), o.Target.id(), res, client.AcquireFlags(flags), nil)
		})
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
func (c *clientRun) acquireWait(pid int, res []client.Resource, flags uint32, wait time.Duration) int {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	backoff := 50 * time.Millisecond
	for {
		r := c.call(func() error {
			return c.cl.Acquire(ctx, pid, res, client.AcquireFlags(flags|client.AcquireOwnerNowait), nil)
		})
		if r >= 0 || lease.Classify("acquire", r) != lease.ErrLocked {
			return r
		}
		d := backoff/2 + rand.N(backoff/2+1)
		if dl, _ := ctx.Deadline(); time.Until(dl) < d {
			return r
		}
		if c.debug {
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

func (c *clientRun) convert(t Target, resource *client.Resource) int {
	c.printf("convert %s\n", t)
	r := int(client.RvEINVAL)
	if resource != nil {
		res := *resource
		r = c.call(func() error { return c.cl.Convert(context.Background(), t.id(), &res, t.flags()) })
	}
	c.printf("convert done %d\n", r)
	return r
}

func (c *clientRun) release(o *ReleaseOptions) int {
	c.printf("release %s\n", o.Target)
	var res []client.Resource
	flags := o.Target.flags()
	switch {
	case o.All:
		flags |= client.RelAll
	case o.Orphan:
		flags |= client.RelOrphan
		if len(o.Resources) > 0 {
			res = o.Resources[:1]
		} else {
			res = []client.Resource{{LockspaceName: o.Lockspace}}
		}
	default:
		res = o.Resources
	}
	var n int
	r := c.call(func() (err error) {
		n, err = c.cl.Release(context.Background(), o.Target.id(), res, client.ReleaseFlags(flags))
		return err
	})
	if r == 0 {
		r = n
	}
	c.printf("release done %d\n", r)
	return r
}

func (c *clientRun) inquire(t Target) int {
	c.printf("inquire %s\n", t)
	var inq client.Inquiry
	r := c.call(func() (err error) { inq, err = inquireTarget(c.cl, t); return err })
	state, count := inq.State, inq.Count
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
	if !c.debug {
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

func (c *clientRun) request(resource *client.Resource, force uint32) int {
	c.printf("request\n")
	r := int(client.RvEINVAL)
	if resource != nil {
		res := *resource
		r = c.call(func() error { return c.cl.Request(context.Background(), &res, 0, client.ForceMode(force)) })
	}
	c.printf("request done %d\n", r)
	return r
}

func (c *clientRun) examine(resource *client.Resource, ls client.Lockspace) int {
	c.printf("examine\n")
	r := int(client.RvEINVAL)
	switch {
	case resource != nil:
		res := *resource
		r = c.call(func() error { return c.cl.ExamineResource(context.Background(), &res) })
	case ls.Disk.Path != "":
		r = c.call(func() error { return c.cl.ExamineLockspace(context.Background(), &ls) })
	}
	c.printf("examine done %d\n", r)
	return r
}

// command registers, acquires the -r leases on the registered connection
// and execs the -c program with that connection inherited, so the leases
// live as long as the program (docs/cli.md "command").
func (c *clientRun) command(o *CommandOptions) int {
	// A terminal gets each line as it is written; into a pipe or a file
	// the lines stay buffered, so a successful exec drops them (sanlock
	// 3.8.5's stdio does the same) and only a failure shows them.
	printf := c.printf
	if o.OutTTY {
		printf = func(format string, a ...any) { c.printf(format, a...); o.IO.Out.Flush() }
	}
	printf("register\n")
	var reg *client.Reg
	r := c.call(func() (err error) { reg, err = c.cl.Register(context.Background()); return err })
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
	r = acquireLines(reg, o.LeaseArgs, o.Owner, printf)
	if r < 0 {
		return 1
	}
	if o.Path == "" {
		select {} // hold the leases until killed
	}
	argv := append([]string{o.Path}, o.Args...)
	err := o.Exec(o.Path, argv, os.Environ())
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

// inquireTarget is INQUIRE of a pid or, with -C, of a client index.
func inquireTarget(cl *client.Client, t Target) (client.Inquiry, error) {
	if t.ForClient {
		return cl.InquireClient(context.Background(), t.ClientID)
	}
	return cl.Inquire(context.Background(), t.Pid)
}

// acquireLines is the acquire of `client command` and `client spawn` on
// the registered connection reg, with its lines: ACQUIRE, or ACQUIRE2
// when owner is set (-h 1), then "acquire done N" and, for a lease held
// by another host, 5.1.1's owner line. It returns the result.
func acquireLines(reg *client.Reg, a LeaseArgs, owner bool, printf func(string, ...any)) int {
	res, flags := a.request()
	var held *client.HeldBy
	var r int
	if owner {
		var err error
		held, err = reg.Acquire2(context.Background(), res, client.AcquireFlags(flags), nil)
		r = rv(err)
	} else {
		r = rv(reg.Acquire(context.Background(), res, client.AcquireFlags(flags), nil))
	}
	printf("acquire done %d\n", r)
	if held != nil {
		printf("owner: host_id %d generation %d timestamp %d state %s name %s\n",
			held.Host.HostID, held.Host.Generation, held.Host.Timestamp, held.Host.StateName(), held.Name)
	}
	return r
}
