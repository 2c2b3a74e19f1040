package cli

import (
	"bufio"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/gosanlock/gosanlock/client"
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
}

func (f *Factory) clientIO() *ClientIO {
	return &ClientIO{Out: f.Out, ErrOut: f.ErrOut, Dial: f.Dial}
}

// connect dials the daemon. A failed dial is kept: every call of the
// action then reports it (clientRun.call).
func (io *ClientIO) connect() *clientRun {
	c := &clientRun{out: io.Out, stderr: io.ErrOut}
	c.cl, c.err = io.Dial()
	return c
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
		opts := build(o, f.clientIO())
		if runF != nil {
			return runF(opts)
		}
		return run(opts)
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
	case "inq_lockspace":
		return NewCmdInqLockspace(f, nil)
	case "rem_lockspace":
		return NewCmdRemLockspace(f, nil)
	case "command":
		return NewCmdCommand(f, nil)
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
}

func NewCmdRenewal(f *Factory, runF func(*RenewalOptions) error) *cobra.Command {
	return newClientCmd(f, "renewal", runF, renewalRun, func(o *options, io *ClientIO) *RenewalOptions {
		return &RenewalOptions{IO: io, Lockspace: o.lockspace.Name, JSON: o.json}
	})
}

func renewalRun(opts *RenewalOptions) error {
	c := opts.IO.connect()
	if opts.JSON {
		return exitWith(c.renewalJSON(opts.Lockspace))
	}
	return exitWith(c.renewal(opts.Lockspace))
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

// AddLockspaceOptions is "client add_lockspace -s LOCKSPACE [-o SEC]".
type AddLockspaceOptions struct {
	IO        *ClientIO
	Lockspace client.Lockspace
	IOTimeout int // -o or the config file's io_timeout
}

func NewCmdAddLockspace(f *Factory, runF func(*AddLockspaceOptions) error) *cobra.Command {
	return newClientCmd(f, "add_lockspace", runF, addLockspaceRun, func(o *options, io *ClientIO) *AddLockspaceOptions {
		return &AddLockspaceOptions{IO: io, Lockspace: o.lockspace, IOTimeout: o.cfg.IOTimeout}
	})
}

func addLockspaceRun(opts *AddLockspaceOptions) error {
	return rvExit(opts.IO.connect().addLockspace(opts.Lockspace, opts.IOTimeout))
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

// ---- leases of a process ----

// LeaseArgs are the -r resources of acquire and command with the flags
// that -P, -n and -O add.
type LeaseArgs struct {
	Resources  []client.Resource // every -r (up to 8)
	Persistent bool              // -P nonzero
	NumHosts   int               // -n
	Orphan     bool              // -O nonzero
}

func leaseArgs(o *options) LeaseArgs {
	return LeaseArgs{Resources: o.resources, Persistent: o.persistent != 0, NumHosts: o.numHosts, Orphan: o.orphan != 0}
}

// CommandOptions is "client command -r RESOURCE ... -c PATH ARGS...".
type CommandOptions struct {
	IO *ClientIO
	LeaseArgs
	Path string   // -c: the program (empty: hold the leases forever)
	Args []string // everything after -c's value
	// OutTTY says stdout is a terminal: the lines then show as they come,
	// and otherwise stay in the buffer that exec discards, as sanlock
	// 3.8.5's stdio does (docs/compat.md).
	OutTTY bool
	Exec   func(path string, argv, env []string) error
}

func NewCmdCommand(f *Factory, runF func(*CommandOptions) error) *cobra.Command {
	return newClientCmd(f, "command", runF, commandRun, func(o *options, io *ClientIO) *CommandOptions {
		return &CommandOptions{IO: io, LeaseArgs: leaseArgs(o), Path: o.command, Args: o.commandArgs,
			OutTTY: f.OutTTY, Exec: f.Exec}
	})
}

func commandRun(opts *CommandOptions) error { return exitWith(opts.IO.connect().command(opts)) }

// AcquireOptions is "client acquire -r RESOURCE ... -p PID [--wait D]".
type AcquireOptions struct {
	IO *ClientIO
	LeaseArgs
	Pid int // -p (default -1)
	// Wait is our --wait: retry a busy lease until then (0: one attempt).
	Wait  time.Duration
	Debug bool // -D: a line on stderr per retry
}

func NewCmdAcquire(f *Factory, runF func(*AcquireOptions) error) *cobra.Command {
	return newClientCmd(f, "acquire", runF, acquireRun, func(o *options, io *ClientIO) *AcquireOptions {
		return &AcquireOptions{IO: io, LeaseArgs: leaseArgs(o), Pid: o.pid, Wait: o.acquireWait, Debug: o.debug}
	})
}

func acquireRun(opts *AcquireOptions) error {
	c := opts.IO.connect()
	c.debug = opts.Debug
	return rvExit(c.acquire(opts))
}

// ConvertOptions is "client convert -r RESOURCE -p PID".
type ConvertOptions struct {
	IO       *ClientIO
	Resource *client.Resource // the first -r; nil without one
	Pid      int              // -p (default -1)
}

func NewCmdConvert(f *Factory, runF func(*ConvertOptions) error) *cobra.Command {
	return newClientCmd(f, "convert", runF, convertRun, func(o *options, io *ClientIO) *ConvertOptions {
		return &ConvertOptions{IO: io, Resource: firstResource(o), Pid: o.pid}
	})
}

func convertRun(opts *ConvertOptions) error {
	return rvExit(opts.IO.connect().convert(opts.Pid, opts.Resource))
}

// ReleaseOptions is "client release -r RESOURCE ... -p PID", or all leases
// (-a 1), or orphans (-O 1, of -r or of the -s lockspace).
type ReleaseOptions struct {
	IO        *ClientIO
	Resources []client.Resource // every -r
	Lockspace string            // -s name (orphans of a lockspace)
	Pid       int               // -p (default -1)
	All       bool              // -a nonzero
	Orphan    bool              // -O nonzero
}

func NewCmdRelease(f *Factory, runF func(*ReleaseOptions) error) *cobra.Command {
	return newClientCmd(f, "release", runF, releaseRun, func(o *options, io *ClientIO) *ReleaseOptions {
		return &ReleaseOptions{IO: io, Resources: o.resources, Lockspace: o.lockspace.Name, Pid: o.pid,
			All: o.all != 0, Orphan: o.orphan != 0}
	})
}

func releaseRun(opts *ReleaseOptions) error { return rvExit(opts.IO.connect().release(opts)) }

// InquireOptions is "client inquire -p PID [-D] [--json]".
type InquireOptions struct {
	IO    *ClientIO
	Pid   int  // -p (default -1)
	Debug bool // -D: the state string parsed and rebuilt
	JSON  bool
}

func NewCmdInquire(f *Factory, runF func(*InquireOptions) error) *cobra.Command {
	return newClientCmd(f, "inquire", runF, inquireRun, func(o *options, io *ClientIO) *InquireOptions {
		return &InquireOptions{IO: io, Pid: o.pid, Debug: o.debug, JSON: o.json}
	})
}

func inquireRun(opts *InquireOptions) error {
	c := opts.IO.connect()
	c.debug = opts.Debug
	if opts.JSON {
		return exitWith(c.inquireJSON(opts.Pid))
	}
	return rvExit(c.inquire(opts.Pid))
}

// RequestOptions is "client request -r RESOURCE -f FORCE_MODE".
type RequestOptions struct {
	IO       *ClientIO
	Resource *client.Resource // the first -r; nil without one
	Force    uint32           // -f
}

func NewCmdRequest(f *Factory, runF func(*RequestOptions) error) *cobra.Command {
	return newClientCmd(f, "request", runF, requestRun, func(o *options, io *ClientIO) *RequestOptions {
		return &RequestOptions{IO: io, Resource: firstResource(o), Force: o.force}
	})
}

func requestRun(opts *RequestOptions) error {
	return rvExit(opts.IO.connect().request(opts.Resource, opts.Force))
}

// ExamineOptions is "client examine -r RESOURCE | -s LOCKSPACE".
type ExamineOptions struct {
	IO        *ClientIO
	Resource  *client.Resource // the first -r (wins); nil without one
	Lockspace client.Lockspace
}

func NewCmdExamine(f *Factory, runF func(*ExamineOptions) error) *cobra.Command {
	return newClientCmd(f, "examine", runF, examineRun, func(o *options, io *ClientIO) *ExamineOptions {
		return &ExamineOptions{IO: io, Resource: firstResource(o), Lockspace: o.lockspace}
	})
}

func examineRun(opts *ExamineOptions) error {
	return rvExit(opts.IO.connect().examine(opts.Resource, opts.Lockspace))
}

// ---- resource index ----

// FormatOptions is "client format -x RINDEX [-Z -A]".
type FormatOptions struct {
	IO        *ClientIO
	RIndex    client.RIndex
	SizeFlags uint32 // -Z/-A as request flags
}

func NewCmdFormat(f *Factory, runF func(*FormatOptions) error) *cobra.Command {
	return newClientCmd(f, "format", runF, formatRun, func(o *options, io *ClientIO) *FormatOptions {
		return &FormatOptions{IO: io, RIndex: o.rindex, SizeFlags: o.sizeFlags()}
	})
}

func formatRun(opts *FormatOptions) error {
	return rvExit(opts.IO.connect().rindexCmd("format", rindexReq{rindex: opts.RIndex, sizeFlags: opts.SizeFlags}))
}

// CreateOptions is "client create -x RINDEX -e NAME [-m MAX] [-n NUM]".
type CreateOptions struct {
	IO       *ClientIO
	RIndex   client.RIndex
	Entry    rentryArg // -e name[:offset]
	MaxHosts int       // -m
	NumHosts int       // -n
}

func NewCmdCreate(f *Factory, runF func(*CreateOptions) error) *cobra.Command {
	return newClientCmd(f, "create", runF, createRun, func(o *options, io *ClientIO) *CreateOptions {
		return &CreateOptions{IO: io, RIndex: o.rindex, Entry: parseRentry(o.eventStr), MaxHosts: o.maxHosts, NumHosts: o.numHosts}
	})
}

func createRun(opts *CreateOptions) error {
	return rvExit(opts.IO.connect().rindexCmd("create",
		rindexReq{rindex: opts.RIndex, entry: opts.Entry, maxHosts: opts.MaxHosts, numHosts: opts.NumHosts}))
}

// DeleteOptions is "client delete -x RINDEX -e NAME[:OFFSET]".
type DeleteOptions struct {
	IO     *ClientIO
	RIndex client.RIndex
	Entry  rentryArg // -e name[:offset]
}

func NewCmdDelete(f *Factory, runF func(*DeleteOptions) error) *cobra.Command {
	return newClientCmd(f, "delete", runF, deleteRun, func(o *options, io *ClientIO) *DeleteOptions {
		return &DeleteOptions{IO: io, RIndex: o.rindex, Entry: parseRentry(o.eventStr)}
	})
}

func deleteRun(opts *DeleteOptions) error {
	return rvExit(opts.IO.connect().rindexCmd("delete", rindexReq{rindex: opts.RIndex, entry: opts.Entry}))
}

// LookupOptions is "client lookup -x RINDEX [-e NAME:OFFSET]".
type LookupOptions struct {
	IO     *ClientIO
	RIndex client.RIndex
	Entry  rentryArg // -e name[:offset]
}

func NewCmdLookup(f *Factory, runF func(*LookupOptions) error) *cobra.Command {
	return newClientCmd(f, "lookup", runF, lookupRun, func(o *options, io *ClientIO) *LookupOptions {
		return &LookupOptions{IO: io, RIndex: o.rindex, Entry: parseRentry(o.eventStr)}
	})
}

func lookupRun(opts *LookupOptions) error {
	return rvExit(opts.IO.connect().rindexCmd("lookup", rindexReq{rindex: opts.RIndex, entry: opts.Entry}))
}

// UpdateOptions is "client update -x RINDEX -e NAME[:OFFSET] [-z 0|1]".
type UpdateOptions struct {
	IO     *ClientIO
	RIndex client.RIndex
	Entry  rentryArg // -e name[:offset]
	Remove bool      // -z: remove the entry instead of adding it
}

func NewCmdUpdate(f *Factory, runF func(*UpdateOptions) error) *cobra.Command {
	return newClientCmd(f, "update", runF, updateRun, func(o *options, io *ClientIO) *UpdateOptions {
		return &UpdateOptions{IO: io, RIndex: o.rindex, Entry: parseRentry(o.eventStr), Remove: o.clear}
	})
}

func updateRun(opts *UpdateOptions) error {
	return rvExit(opts.IO.connect().rindexCmd("update", rindexReq{rindex: opts.RIndex, entry: opts.Entry, remove: opts.Remove}))
}

// RebuildOptions is "client rebuild -x RINDEX".
type RebuildOptions struct {
	IO     *ClientIO
	RIndex client.RIndex
}

func NewCmdRebuild(f *Factory, runF func(*RebuildOptions) error) *cobra.Command {
	return newClientCmd(f, "rebuild", runF, rebuildRun, func(o *options, io *ClientIO) *RebuildOptions {
		return &RebuildOptions{IO: io, RIndex: o.rindex}
	})
}

func rebuildRun(opts *RebuildOptions) error {
	return rvExit(opts.IO.connect().rindexCmd("rebuild", rindexReq{rindex: opts.RIndex}))
}

// ---- version, reexec, locks ----

// ClientVersionOptions is "client version".
type ClientVersionOptions struct {
	IO *ClientIO
}

func NewCmdClientVersion(f *Factory, runF func(*ClientVersionOptions) error) *cobra.Command {
	return newClientCmd(f, "version", runF, clientVersionRun, func(_ *options, io *ClientIO) *ClientVersionOptions {
		return &ClientVersionOptions{IO: io}
	})
}

func clientVersionRun(opts *ClientVersionOptions) error {
	opts.IO.connect().version()
	return nil
}

// ReexecOptions is "client reexec [-e PATH]" (ours, docs/upgrade.md).
type ReexecOptions struct {
	IO   *ClientIO
	Path string // -e: the new binary; empty: the daemon's own
}

func NewCmdReexec(f *Factory, runF func(*ReexecOptions) error) *cobra.Command {
	return newClientCmd(f, "reexec", runF, reexecRun, func(o *options, io *ClientIO) *ReexecOptions {
		return &ReexecOptions{IO: io, Path: o.eventStr}
	})
}

func reexecRun(opts *ReexecOptions) error { return rvExit(opts.IO.connect().reexec(opts.Path)) }

// LocksOptions is "client locks [-s LOCKSPACE] [-r RESOURCE ...] [--json]"
// (ours, docs/json.md).
type LocksOptions struct {
	IO        *ClientIO
	Lockspace string            // -s name: only this lockspace
	Resources []client.Resource // -r: also read these leases
	JSON      bool
}

func NewCmdLocks(f *Factory, runF func(*LocksOptions) error) *cobra.Command {
	return newClientCmd(f, "locks", runF, locksRun, func(o *options, io *ClientIO) *LocksOptions {
		return &LocksOptions{IO: io, Lockspace: o.lockspace.Name, Resources: o.resources, JSON: o.json}
	})
}

func locksRun(opts *LocksOptions) error { return exitWith(opts.IO.connect().locks(opts)) }
