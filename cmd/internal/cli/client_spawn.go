package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gosanlock/gosanlock/client"
)

// SpawnOptions is "client spawn -r RESOURCE ... [-h 0|1] [-O 0|1] [-P 0|1]
// [-d 0|1] -c COUNT CMD [ARG...] [-c COUNT CMD [ARG...]]" (5.x).
type SpawnOptions struct {
	IO *ClientIO
	LeaseArgs
	// Owner (-h nonzero): acquire with ACQUIRE2 and print the owner of a
	// lease held by another host, as command -h 1 does.
	Owner bool
	// NoDisk (-d nonzero): release with NO_DISK at the end.
	NoDisk bool
	// Programs are the -c groups in order: each the program and its
	// arguments.
	Programs [][]string
	// OutTTY: see CommandOptions.OutTTY.
	OutTTY bool
	// BadResources: see CommandOptions.BadResources.
	BadResources []string
}

func NewCmdSpawn(f *Factory, runF func(*SpawnOptions) error) *cobra.Command {
	return newClientCmd(f, "spawn", runF, spawnRun, func(o *options, io *ClientIO) *SpawnOptions {
		return &SpawnOptions{IO: io, LeaseArgs: leaseArgs(o), Owner: o.getHosts != 0, NoDisk: o.data != 0,
			Programs: o.spawns, OutTTY: f.OutTTY, BadResources: o.badResources}
	})
}

func spawnRun(opts *SpawnOptions) error {
	if len(opts.Programs) == 0 {
		fmt.Fprintln(opts.IO.Out, "spawn requires at least one -c command")
		return exitWith(1)
	}
	if len(opts.BadResources) > 0 {
		_ = opts.IO.Out.Flush()
		fmt.Fprintf(opts.IO.ErrOut, "spawn: %d -r option(s) not usable (see above): no program run\n", len(opts.BadResources))
		return exitWith(1)
	}
	if len(opts.Resources) == 0 {
		// 5.1.1 runs the programs with no lease at all; we do not.
		fmt.Fprintln(opts.IO.Out, "spawn requires at least one -r resource")
		return exitWith(1)
	}
	return exitWith(opts.IO.connect().spawn(opts))
}

// spawnRestrict are the restrict flags spawn sets on its registered
// connection before the acquire (what 5.1.1 sends).
const spawnRestrict = client.RestrictSigkill | client.RestrictSigterm

// spawn registers, acquires the -r leases on the registered connection
// and, holding them, runs each -c program in turn as its child, waiting
// for it; the first program that fails ends the run. Then it releases
// every lease (with NO_DISK for -d 1). The leases belong to this process,
// not to the programs; each program is started with SIGKILL as its
// parent-death signal, so none outlives the process that holds its
// leases (docs/cli.md "spawn"). Nothing runs unless the register and the
// acquire succeeded. The result is the exit status: 0 when every program
// exited 0 and the release succeeded.
func (c *clientRun) spawn(o *SpawnOptions) int {
	printf := c.printf
	if o.OutTTY {
		printf = func(format string, a ...any) { c.printf(format, a...); o.IO.Out.Flush() }
	}
	printf("register\n")
	var reg *client.Reg
	r := c.call(func() (err error) { reg, err = c.cl.Register(context.Background()); return err })
	fd := -1
	if r == 0 {
		fd, r = regFD(reg, false)
	}
	if r < 0 {
		printf("register done %d\n", r)
		o.IO.Out.Flush()
		if l := c.noDaemonLine(); l != "" {
			fmt.Fprintln(c.stderr, l)
		}
		fmt.Fprintf(c.stderr, "spawn: register failed (%d): no program run\n", r)
		c.reported = true
		return 1
	}
	defer reg.Close()
	printf("register done %d\n", fd)
	if r = rv(reg.Restrict(context.Background(), spawnRestrict)); r < 0 {
		fmt.Fprintf(c.stderr, "spawn: restrict failed (%d): no program run\n", r)
		c.reported = true
		return 1
	}
	printf("acquire fd %d\n", fd)
	if r = acquireLines(reg, o.LeaseArgs, o.Owner, nil, printf); r < 0 {
		o.IO.Out.Flush()
		fmt.Fprintf(c.stderr, "spawn: acquire failed: %s: no program run\n", explain(r, ""))
		c.reported = true
		return 1
	}

	status := 0
	for _, argv := range o.Programs {
		printf("spawn: %s\n", argv[0])
		// The children write to the same stdout: what is buffered goes
		// first.
		o.IO.Out.Flush()
		code := c.runChild(argv)
		printf("spawn done %d\n", code)
		if code != 0 {
			status = 1
			break
		}
	}

	printf("release\n")
	relFlags := uint32(client.RelAll)
	if o.NoDisk {
		relFlags |= client.RelNoDisk
	}
	n, err := reg.Release(context.Background(), nil, client.ReleaseFlags(relFlags))
	r = n
	if err != nil {
		r = rv(err)
	}
	printf("release done %d\n", r)
	if r < 0 {
		status = 1
	}
	return status
}

// runChild runs argv (argv[0] as given: no PATH search) with this
// process's stdin, stdout, stderr and environment, and returns what
// "spawn done" prints: its exit status, or 1 when it could not start or
// was killed by a signal. A failed start prints "spawn execv failed:
// <error>" on stderr.
func (c *clientRun) runChild(argv []string) int {
	// The parent-death signal follows the thread that started the child:
	// keep this goroutine on one thread until the child is gone.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := &exec.Cmd{Path: argv[0], Args: argv, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}}
	if err := cmd.Start(); err != nil {
		var cause error = err
		if pe, ok := err.(*os.PathError); ok {
			cause = pe.Err
		}
		fmt.Fprintf(c.stderr, "spawn execv failed: %s\n", errText(cause))
		return 1
	}
	_ = cmd.Wait()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Exited() {
		return 1
	}
	return ws.ExitStatus()
}
