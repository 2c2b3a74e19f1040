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
	"github.com/gosanlock/gosanlock/rescode"
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
		// The first line shows at once: the wait may be long.
		_ = o.IO.Out.Flush()
		prog := newProgress(c.stderr, o.IO.ErrTTY)
		r = c.retryBusy(o.Wait, prog, func(ctx context.Context) int {
			r := c.call(func() error {
				return c.cl.Acquire(ctx, o.Target.id(), res, client.AcquireFlags(flags|client.AcquireOwnerNowait), nil)
			})
			if r == client.RvEBUSY && c.unregistered(o.Target) {
				// Busy only because nobody holds the pid's registration:
				// waiting cannot help.
				return retryStop
			}
			return r
		})
		prog.clear()
	} else {
		prog := newProgress(c.stderr, o.IO.ErrTTY)
		stop := c.watchOwners(prog, res)
		r = c.call(func() error {
			return c.cl.Acquire(context.Background(), o.Target.id(), res, client.AcquireFlags(flags), nil)
		})
		stop()
		if r == client.RvEBUSY {
			c.unregistered(o.Target)
		}
	}
	c.printf("acquire done %d\n", r)
	return r
}

// retryStop, returned by an attempt of retryBusy, ends the retries with
// the busy result EBUSY.
const retryStop = 1

// retryBusy runs attempt until it gives a result other than a lease held
// elsewhere or a lost ballot (the codes lease.Classify calls ErrLocked),
// or until wait has passed, with jittered backoff; it returns the last
// result. Attempts should ask the daemon not to wait for a dead owner
// (OWNER_NOWAIT), so that the deadline holds: a dead owner's lease is
// taken over by the first attempt after its host lease timed out. While
// it waits, prog shows the last result and the seconds left, and -D
// prints a line per retry.
func (c *clientRun) retryBusy(wait time.Duration, prog *progress, attempt func(context.Context) int) int {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	dl, _ := ctx.Deadline()
	backoff := 50 * time.Millisecond
	for {
		r := attempt(ctx)
		if r == retryStop {
			return client.RvEBUSY
		}
		if r >= 0 || lease.Classify("acquire", r) != lease.ErrLocked {
			return r
		}
		d := backoff/2 + rand.N(backoff/2+1)
		if time.Until(dl) < d {
			return r
		}
		if c.debug {
			fmt.Fprintf(c.stderr, "acquire %d, retry in %v\n", r, d.Round(time.Millisecond))
		}
		prog.show("acquire: %s (%d), retrying for %d s more", codeName(r), r, int((time.Until(dl)+time.Second-1)/time.Second))
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

// unregistered says whether t is a pid the daemon has no registered
// client for, and then keeps that as the cause of the failure. A pid
// target only: a client index is not checked, nor is anything when the
// daemon's status cannot be read.
func (c *clientRun) unregistered(t Target) bool {
	if t.ForClient || c.err != nil {
		return false
	}
	if t.Pid == -1 {
		// Without -p the acquire is for the tool's own connection, which
		// is never registered.
		c.cause = "no -p given, and this tool is not a registered process"
		return true
	}
	recs, err := c.cl.Status(context.Background(), 0)
	if err != nil {
		return false
	}
	for i := range recs {
		if recs[i].Type == client.StateClient && int32(recs[i].Data32) == int32(t.Pid) {
			return false
		}
	}
	c.cause = fmt.Sprintf("pid %d is not registered with the daemon (it must call sanlock_register first)", t.Pid)
	return true
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
// live as long as the program (docs/cli.md "command"). The program runs
// only under its leases: a -r that was not kept, a failed register or a
// failed acquire refuse it with a line on stderr and exit status 1, and
// so does a failed exec.
func (c *clientRun) command(o *CommandOptions) int {
	if len(o.BadResources) > 0 {
		return c.refuse(o, fmt.Sprintf("%d -r option(s) not usable (see above)", len(o.BadResources)))
	}
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
		fd, r = regFD(reg, true)
	}
	if r < 0 {
		printf("register done %d\n", r)
		if l := c.noDaemonLine(); l != "" {
			return c.refuse(o, strings.TrimPrefix(l, "sanlock: "))
		}
		return c.refuse(o, "register failed: "+explain(r, c.cause))
	}
	printf("register done %d\n", fd)
	printf("acquire fd %d\n", fd)
	prog := newProgress(c.stderr, o.IO.ErrTTY)
	stop := func() {}
	if o.Wait == 0 {
		stop = c.watchOwners(prog, o.Resources)
	}
	r = acquireLines(reg, o.LeaseArgs, o.Owner, c.waitRetry(o.Wait, prog), printf)
	stop()
	if r < 0 {
		c.askCause(r)
		return c.refuse(o, "acquire failed: "+explain(r, c.cause))
	}
	if o.Path == "" {
		select {} // hold the leases until killed
	}
	argv := append([]string{o.Path}, o.Args...)
	err := o.Exec(o.Path, argv, os.Environ())
	fmt.Fprintf(c.stderr, "execv failed: %s\n", errText(err))
	c.reported = true
	return 1
}

// refuse ends client command without running its program: one stderr
// line with why.
func (c *clientRun) refuse(o *CommandOptions, why string) int {
	_ = o.IO.Out.Flush()
	if o.Path == "" {
		fmt.Fprintf(c.stderr, "sanlock: command refused: %s\n", why)
	} else {
		fmt.Fprintf(c.stderr, "sanlock: command refused, %s not run: %s\n", o.Path, why)
	}
	c.reported = true
	return 1
}

// waitRetry is how acquireLines repeats an attempt with --wait: through
// retryBusy. Without --wait it is nil: one attempt.
func (c *clientRun) waitRetry(wait time.Duration, prog *progress) func(func(context.Context) int) int {
	if wait <= 0 {
		return nil
	}
	return func(attempt func(context.Context) int) int {
		defer prog.clear()
		return c.retryBusy(wait, prog, attempt)
	}
}

// regFD returns the registered connection's descriptor number. inherit
// clears close-on-exec so that a program exec'd in place of the tool
// (command) keeps the registration; spawn leaves it set, its programs do
// not inherit the connection. A connection that is not a Unix socket (a
// client with its own Dialer) has no descriptor: -EINVAL.
func regFD(reg *client.Reg, inherit bool) (int, int) {
	conn := reg.Conn()
	if conn == nil {
		return -1, rescode.RvEINVAL
	}
	rc, err := conn.SyscallConn()
	if err != nil {
		return -1, rv(err)
	}
	fd := -1
	var ferr error
	if err := rc.Control(func(p uintptr) {
		fd = int(p)
		if inherit {
			_, ferr = unix.FcntlInt(p, unix.F_SETFD, 0)
		}
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
// by another host, 5.1.1's owner line. retry runs the attempts (nil: one
// attempt; with --wait each asks not to wait for a dead owner). It
// returns the result.
func acquireLines(reg *client.Reg, a LeaseArgs, owner bool, retry func(func(context.Context) int) int,
	printf func(string, ...any)) int {
	res, flags := a.request()
	var nowait uint32
	if retry == nil {
		retry = func(attempt func(context.Context) int) int { return attempt(context.Background()) }
	} else {
		nowait = client.AcquireOwnerNowait
	}
	var held *client.HeldBy
	r := retry(func(ctx context.Context) int {
		held = nil
		if owner {
			var err error
			held, err = reg.Acquire2(ctx, res, client.AcquireFlags(flags|nowait), nil)
			return rv(err)
		}
		return rv(reg.Acquire(ctx, res, client.AcquireFlags(flags|nowait), nil))
	})
	printf("acquire done %d\n", r)
	if held != nil {
		printf("owner: host_id %d generation %d timestamp %d state %s name %s\n",
			held.Host.HostID, held.Host.Generation, held.Host.Timestamp, held.Host.StateName(), held.Name)
	}
	return r
}
