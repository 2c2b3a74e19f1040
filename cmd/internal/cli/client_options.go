package cli

import (
	"bufio"
	"io"

	"github.com/spf13/cobra"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/diskfmt"
)

// The client actions, one command each in the cli/cli style (docs/cli.md
// "Command tree"): an options struct with only what the action uses,
// NewCmdX(f, runF) that scans sanlock's syntax (Factory.scan) and fills
// it, and xRun(opts) that does the work. A test passes runF to see the
// options without running the action.

// ClientIO is what a client action reaches outside its options: the
// streams and the daemon.
type ClientIO struct {
	Out    *bufio.Writer
	ErrOut io.Writer
	Dial   func() (*client.Client, error)
	// ErrTTY says ErrOut is a terminal: progress lines are drawn there.
	ErrTTY bool
	// OpenDevice opens lease storage, read by the progress of
	// add_lockspace.
	OpenDevice func(path string) (diskfmt.Device, error)

	run *clientRun // the connection of the action, for diagnose
}

func (f *Factory) clientIO() *ClientIO {
	return &ClientIO{Out: f.Out, ErrOut: f.ErrOut, Dial: f.Dial, ErrTTY: f.ErrTTY, OpenDevice: f.OpenDevice}
}

// connect dials the daemon. A failed dial is kept: every call of the
// action then reports it (clientRun.call).
func (io *ClientIO) connect() *clientRun {
	c := &clientRun{out: io.Out, stderr: io.ErrOut}
	c.cl, c.err = io.Dial()
	c.watchDial()
	io.run = c
	return c
}

// diagnose prints the stderr line of a failed action (clientRun.diagnose);
// err is what the action returned.
func (io *ClientIO) diagnose(action string, err error) {
	if err == nil || io.run == nil {
		return
	}
	io.run.diagnose(action)
}

// newClientCmd is the command of a client action: it scans the arguments,
// turns the scan into the action's options (build) and runs them, or hands
// them to runF when not nil.
func newClientCmd[O any](f *Factory, action string, runF func(*O) error, run func(*O) error,
	build func(*options, *ClientIO) *O) *cobra.Command {
	a, ok := clientActionNamed(action)
	if !ok {
		panic("cli: no client action " + action)
	}
	return newOptionsCmd(f, "client", action, a.use, a.short, func(o *options) error {
		cio := f.clientIO()
		opts := build(o, cio)
		if runF != nil {
			return runF(opts)
		}
		err := run(opts)
		// Stdout is complete before the explanation goes to stderr.
		_ = cio.Out.Flush()
		cio.diagnose(action, err)
		return err
	})
}

// newClientActionCmd is the command of the client action called name.
func newClientActionCmd(f *Factory, name string) *cobra.Command {
	switch name {
	case "status":
		return NewCmdStatus(f, nil)
	case "gets":
		return NewCmdGets(f, nil)
	case "host_status":
		return NewCmdHostStatus(f, nil)
	case "renewal":
		return NewCmdRenewal(f, nil)
	case "set_event":
		return NewCmdSetEvent(f, nil)
	case "set_host":
		return NewCmdSetHost(f, nil)
	case "set_config":
		return NewCmdSetConfig(f, nil)
	case "log_dump":
		return NewCmdLogDump(f, nil)
	case "shutdown":
		return NewCmdShutdown(f, nil)
	case "init", "write":
		return NewCmdInit(f, name, nil)
	case "read":
		return NewCmdRead(f, nil)
	case "add_lockspace":
		return NewCmdAddLockspace(f, nil)
	case "init_host":
		return NewCmdInitHost(f, nil)
	case "inq_lockspace":
		return NewCmdInqLockspace(f, nil)
	case "rem_lockspace":
		return NewCmdRemLockspace(f, nil)
	case "command":
		return NewCmdCommand(f, nil)
	case "spawn":
		return NewCmdSpawn(f, nil)
	case "acquire":
		return NewCmdAcquire(f, nil)
	case "convert":
		return NewCmdConvert(f, nil)
	case "release":
		return NewCmdRelease(f, nil)
	case "inquire":
		return NewCmdInquire(f, nil)
	case "request":
		return NewCmdRequest(f, nil)
	case "examine":
		return NewCmdExamine(f, nil)
	case "format":
		return NewCmdFormat(f, nil)
	case "create":
		return NewCmdCreate(f, nil)
	case "delete":
		return NewCmdDelete(f, nil)
	case "lookup":
		return NewCmdLookup(f, nil)
	case "update":
		return NewCmdUpdate(f, nil)
	case "rebuild":
		return NewCmdRebuild(f, nil)
	case "align":
		return NewCmdAlign(f, nil)
	case "version":
		return NewCmdClientVersion(f, nil)
	case "reexec":
		return NewCmdReexec(f, nil)
	case "locks":
		return NewCmdLocks(f, nil)
	}
	panic("cli: no command for client action " + name)
}

// rvExit is the exit of an action that returns its result code: 0 only
// for 0.
func rvExit(rv int) error { return exitWith(exitStatus(rv)) }

// firstResource is the first -r resource, or nil.
func firstResource(o *options) *client.Resource {
	if len(o.resources) == 0 {
		return nil
	}
	r := o.resources[0]
	return &r
}

// ---- status, gets, host_status, renewal, log_dump ----

// StatusOptions is "client status [-D] [-o p|s] [--json]".
type StatusOptions struct {
	IO    *ClientIO
	Debug bool // -D: each record's key=value pairs
	Sort  byte // -o: 'p' by process, 's' by lockspace, else as listed
	JSON  bool
}

func NewCmdStatus(f *Factory, runF func(*StatusOptions) error) *cobra.Command {
	return newClientCmd(f, "status", runF, statusRun, func(o *options, io *ClientIO) *StatusOptions {
		return &StatusOptions{IO: io, Debug: o.debug, Sort: o.sortArg, JSON: o.json}
	})
}

func statusRun(opts *StatusOptions) error {
	c := opts.IO.connect()
	c.debug = opts.Debug
	if opts.JSON {
		return exitWith(c.statusJSON())
	}
	return exitWith(c.status(opts.Sort))
}

// GetsOptions is "client gets [-h 0|1] [--json]".
type GetsOptions struct {
	IO    *ClientIO
	Hosts bool // -h nonzero: the hosts of each lockspace too
	JSON  bool
}

func NewCmdGets(f *Factory, runF func(*GetsOptions) error) *cobra.Command {
	return newClientCmd(f, "gets", runF, getsRun, func(o *options, io *ClientIO) *GetsOptions {
		return &GetsOptions{IO: io, Hosts: o.getHosts != 0, JSON: o.json}
	})
}

func getsRun(opts *GetsOptions) error {
	c := opts.IO.connect()
	if opts.JSON {
		return exitWith(c.getsJSON(opts.Hosts))
	}
	return exitWith(c.gets(opts.Hosts))
}

// HostStatusOptions is "client host_status [-s LOCKSPACE] [-D] [--json]".
type HostStatusOptions struct {
	IO        *ClientIO
	Lockspace string // -s name; empty: every lockspace
	Debug     bool   // -D: each host's key=value pairs
	JSON      bool
}

func NewCmdHostStatus(f *Factory, runF func(*HostStatusOptions) error) *cobra.Command {
	return newClientCmd(f, "host_status", runF, hostStatusRun, func(o *options, io *ClientIO) *HostStatusOptions {
		return &HostStatusOptions{IO: io, Lockspace: o.lockspace.Name, Debug: o.debug, JSON: o.json}
	})
}

func hostStatusRun(opts *HostStatusOptions) error {
	c := opts.IO.connect()
	c.debug = opts.Debug
	if opts.JSON {
		return exitWith(c.hostStatusJSON(opts.Lockspace))
	}
	return exitWith(c.hostStatus(opts.Lockspace))
}

// RenewalOptions is "client renewal -s LOCKSPACE [--json]".
type RenewalOptions struct {
	IO        *ClientIO
	Lockspace string // -s name
	JSON      bool
	OutTTY    bool // stdout is a terminal: each renewal gets a bar
}

func NewCmdRenewal(f *Factory, runF func(*RenewalOptions) error) *cobra.Command {
	return newClientCmd(f, "renewal", runF, renewalRun, func(o *options, io *ClientIO) *RenewalOptions {
		return &RenewalOptions{IO: io, Lockspace: o.lockspace.Name, JSON: o.json, OutTTY: f.OutTTY}
	})
}

func renewalRun(opts *RenewalOptions) error {
	c := opts.IO.connect()
	if opts.JSON {
		return exitWith(c.renewalJSON(opts.Lockspace))
	}
	return exitWith(c.renewal(opts.Lockspace, opts.OutTTY))
}

// LogDumpOptions is "client log_dump".
type LogDumpOptions struct {
	IO *ClientIO
}

func NewCmdLogDump(f *Factory, runF func(*LogDumpOptions) error) *cobra.Command {
	return newClientCmd(f, "log_dump", runF, logDumpRun, func(_ *options, io *ClientIO) *LogDumpOptions {
		return &LogDumpOptions{IO: io}
	})
}

func logDumpRun(opts *LogDumpOptions) error { return exitWith(opts.IO.connect().logDump()) }

// ---- events, config, shutdown ----

// SetEventOptions is "client set_event -s LOCKSPACE -i ID [-g GEN] -e EVENT -d DATA".
type SetEventOptions struct {
	IO        *ClientIO
	Lockspace string // -s name
	// Event is -i host_id, -g generation, -e event and -d data (numbers
	// in C's strtoull base 0: decimal, 0x hex, leading-0 octal).
	Event client.HostEvent
}

func NewCmdSetEvent(f *Factory, runF func(*SetEventOptions) error) *cobra.Command {
	return newClientCmd(f, "set_event", runF, setEventRun, func(o *options, io *ClientIO) *SetEventOptions {
		ev, _ := strtoull(o.eventStr, 0)
		return &SetEventOptions{IO: io, Lockspace: o.lockspace.Name,
			Event: client.HostEvent{HostID: o.hostID, Generation: o.generation, Event: ev, Data: o.data}}
	})
}

func setEventRun(opts *SetEventOptions) error {
	return rvExit(opts.IO.connect().setEvent(opts.Lockspace, opts.Event))
}

// SetHostOptions is "client set_host -s LOCKSPACE -i ID [-g GEN] -F FLAG_NAME".
type SetHostOptions struct {
	IO        *ClientIO
	Lockspace client.Lockspace // -s (name and our host_id)
	HostID    uint64           // -i
	// Generation is -g: the incarnation to mark (0: the one on disk).
	Generation uint64
	Flag       string // -F: DEAD_EXT is the only one
}

func NewCmdSetHost(f *Factory, runF func(*SetHostOptions) error) *cobra.Command {
	return newClientCmd(f, "set_host", runF, setHostRun, func(o *options, io *ClientIO) *SetHostOptions {
		return &SetHostOptions{IO: io, Lockspace: o.lockspace, HostID: o.hostID, Generation: o.generation, Flag: o.file}
	})
}

// setHostRun: as 5.1.1's tool, a flag name other than DEAD_EXT (or none)
// prints "set_host unknown operation" and exits 0 without a request.
func setHostRun(opts *SetHostOptions) error {
	if opts.Flag != "DEAD_EXT" {
		_, _ = opts.IO.Out.WriteString("set_host unknown operation\n")
		_ = opts.IO.Out.Flush()
		return nil
	}
	return rvExit(opts.IO.connect().setHost(&opts.Lockspace, client.Host{HostID: opts.HostID, Generation: opts.Generation}, opts.Flag))
}

// SetConfigOptions is "client set_config -s LOCKSPACE [-u 0|1] [-O 0|1]".
type SetConfigOptions struct {
	IO        *ClientIO
	Lockspace string // -s name
	Value     uint32 // from -O (wins) or -u: client.Config*; 0 when neither
}

func NewCmdSetConfig(f *Factory, runF func(*SetConfigOptions) error) *cobra.Command {
	return newClientCmd(f, "set_config", runF, setConfigRun, func(o *options, io *ClientIO) *SetConfigOptions {
		return &SetConfigOptions{IO: io, Lockspace: o.lockspace.Name, Value: o.configValue()}
	})
}

func setConfigRun(opts *SetConfigOptions) error {
	return rvExit(opts.IO.connect().setConfig(opts.Lockspace, opts.Value))
}

// ShutdownOptions is "client shutdown [-f 0|1] [-w 0|1]".
type ShutdownOptions struct {
	IO    *ClientIO
	Force uint32 // -f
	Wait  int    // -w
}

func NewCmdShutdown(f *Factory, runF func(*ShutdownOptions) error) *cobra.Command {
	return newClientCmd(f, "shutdown", runF, shutdownRun, func(o *options, io *ClientIO) *ShutdownOptions {
		return &ShutdownOptions{IO: io, Force: o.force, Wait: o.wait}
	})
}

func shutdownRun(opts *ShutdownOptions) error {
	return rvExit(opts.IO.connect().shutdown(opts.Force, opts.Wait))
}

// ---- init / write, read, align ----

// InitOptions is "client init" and its twin "client write": a lockspace
// (-s with a path) or else the first -r resource.
type InitOptions struct {
	IO        *ClientIO
	Lockspace client.Lockspace
	Resource  *client.Resource // the first -r; nil without one
	SizeFlags uint32           // -Z/-A as request flags
	MaxHosts  int              // -m
	NumHosts  int              // -n
	Clear     bool             // -z
	IOTimeout int              // -o or the config file's io_timeout
}

// NewCmdInit is "client init", or "client write" with action "write".
func NewCmdInit(f *Factory, action string, runF func(*InitOptions) error) *cobra.Command {
	return newClientCmd(f, action, runF, initRun, func(o *options, io *ClientIO) *InitOptions {
		return &InitOptions{IO: io, Lockspace: o.lockspace, Resource: firstResource(o), SizeFlags: o.sizeFlags(),
			MaxHosts: o.maxHosts, NumHosts: o.numHosts, Clear: o.clear, IOTimeout: o.cfg.IOTimeout}
	})
}

func initRun(opts *InitOptions) error { return rvExit(opts.IO.connect().init(opts)) }

// ReadOptions is "client read": a lockspace (-s with a path) or else the
// first -r resource.
type ReadOptions struct {
	IO        *ClientIO
	Lockspace client.Lockspace
	Resource  *client.Resource // the first -r; nil without one
	SizeFlags uint32           // -Z/-A as request flags
	Owners    bool             // -h nonzero: a resource's owners too
	Debug     bool             // -D: the sizes (and io_timeout)
}

func NewCmdRead(f *Factory, runF func(*ReadOptions) error) *cobra.Command {
	return newClientCmd(f, "read", runF, readRun, func(o *options, io *ClientIO) *ReadOptions {
		return &ReadOptions{IO: io, Lockspace: o.lockspace, Resource: firstResource(o), SizeFlags: o.sizeFlags(),
			Owners: o.getHosts != 0, Debug: o.debug}
	})
}

func readRun(opts *ReadOptions) error {
	c := opts.IO.connect()
	c.debug = opts.Debug
	return rvExit(c.read(opts))
}

// AlignOptions is "client align -s LOCKSPACE".
type AlignOptions struct {
	IO   *ClientIO
	Disk client.Disk // the -s path and offset
}

func NewCmdAlign(f *Factory, runF func(*AlignOptions) error) *cobra.Command {
	return newClientCmd(f, "align", runF, alignRun, func(o *options, io *ClientIO) *AlignOptions {
		return &AlignOptions{IO: io, Disk: o.lockspace.Disk}
	})
}

func alignRun(opts *AlignOptions) error { return rvExit(opts.IO.connect().align(opts.Disk)) }

// ---- lockspaces ----

// AddLockspaceOptions is "client add_lockspace -s LOCKSPACE [-o SEC] [-N 1]".
type AddLockspaceOptions struct {
	IO        *ClientIO
	Lockspace client.Lockspace
	IOTimeout int  // -o or the config file's io_timeout
	NoDelay   bool // -N nonzero: NODELAY (5.x)
}

func NewCmdAddLockspace(f *Factory, runF func(*AddLockspaceOptions) error) *cobra.Command {
	return newClientCmd(f, "add_lockspace", runF, addLockspaceRun, func(o *options, io *ClientIO) *AddLockspaceOptions {
		return &AddLockspaceOptions{IO: io, Lockspace: o.lockspace, IOTimeout: o.cfg.IOTimeout, NoDelay: o.nodelay != 0}
	})
}

func addLockspaceRun(opts *AddLockspaceOptions) error {
	var flags uint32
	if opts.NoDelay {
		flags = client.AddNoDelay
	}
	c := opts.IO.connect()
	prog := newProgress(opts.IO.ErrOut, opts.IO.ErrTTY)
	if prog != nil {
		c.afterFirstLine = func() { _ = opts.IO.Out.Flush() }
	}
	c.watchJoin = func() func() {
		return c.watchAddLockspace(prog, opts.Lockspace, opts.IOTimeout, opts.NoDelay, opts.IO.OpenDevice)
	}
	return rvExit(c.addLockspace(opts.Lockspace, opts.IOTimeout, flags))
}

// InqLockspaceOptions is "client inq_lockspace -s LOCKSPACE".
type InqLockspaceOptions struct {
	IO        *ClientIO
	Lockspace client.Lockspace
}

func NewCmdInqLockspace(f *Factory, runF func(*InqLockspaceOptions) error) *cobra.Command {
	return newClientCmd(f, "inq_lockspace", runF, inqLockspaceRun, func(o *options, io *ClientIO) *InqLockspaceOptions {
		return &InqLockspaceOptions{IO: io, Lockspace: o.lockspace}
	})
}

func inqLockspaceRun(opts *InqLockspaceOptions) error {
	return rvExit(opts.IO.connect().inqLockspace(opts.Lockspace))
}

// RemLockspaceOptions is "client rem_lockspace -s LOCKSPACE".
type RemLockspaceOptions struct {
	IO        *ClientIO
	Lockspace client.Lockspace
}

func NewCmdRemLockspace(f *Factory, runF func(*RemLockspaceOptions) error) *cobra.Command {
	return newClientCmd(f, "rem_lockspace", runF, remLockspaceRun, func(o *options, io *ClientIO) *RemLockspaceOptions {
		return &RemLockspaceOptions{IO: io, Lockspace: o.lockspace}
	})
}

func remLockspaceRun(opts *RemLockspaceOptions) error {
	return rvExit(opts.IO.connect().remLockspace(opts.Lockspace))
}
