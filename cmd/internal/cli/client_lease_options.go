package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gosanlock/gosanlock/client"
)

// The client actions on the leases of a process and on the resource
// index, in the style of client_options.go.

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

// CommandOptions is "client command -r RESOURCE ... [-h 0|1] -c PATH ARGS...".
type CommandOptions struct {
	IO *ClientIO
	LeaseArgs
	// Owner (-h nonzero, 5.x): acquire with ACQUIRE2 and print the owner
	// of a lease held by another host.
	Owner bool
	Path  string   // -c: the program (empty: hold the leases forever)
	Args  []string // everything after -c's value
	// OutTTY says stdout is a terminal: the lines then show as they come,
	// and otherwise stay in the buffer that exec discards, as sanlock
	// 3.8.5's stdio does (docs/compat.md).
	OutTTY bool
	Exec   func(path string, argv, env []string) error
	// Wait is our --wait: retry a busy lease until then (0: one attempt).
	Wait time.Duration
	// BadResources are the -r values that were not kept, as their stderr
	// lines: with any, nothing is run.
	BadResources []string
}

func NewCmdCommand(f *Factory, runF func(*CommandOptions) error) *cobra.Command {
	return newClientCmd(f, "command", runF, commandRun, func(o *options, io *ClientIO) *CommandOptions {
		return &CommandOptions{IO: io, LeaseArgs: leaseArgs(o), Owner: o.getHosts != 0, Path: o.command, Args: o.commandArgs,
			OutTTY: f.OutTTY, Exec: f.Exec, Wait: o.acquireWait, BadResources: o.badResources}
	})
}

func commandRun(opts *CommandOptions) error { return exitWith(opts.IO.connect().command(opts)) }

// Target is the process a lease action is for: -p PID, or -C CLIENT_ID
// (3.9.5+: the client index, ci= in status -D; sent with FOR_CLIENT_ID).
type Target struct {
	Pid       int  // -p (default -1)
	ClientID  int  // -C
	ForClient bool // -C given
}

func targetOf(o *options) Target {
	return Target{Pid: o.pid, ClientID: o.clientID, ForClient: o.clientIDSet}
}

// id and flags are data2 and the cmd_flags bit of the target.
func (t Target) id() int {
	if t.ForClient {
		return t.ClientID
	}
	return t.Pid
}

func (t Target) flags() uint32 {
	if t.ForClient {
		return client.ForClientID
	}
	return 0
}

// String is what the tool prints after the action's name.
func (t Target) String() string {
	if t.ForClient {
		return fmt.Sprintf("client_id %d", t.ClientID)
	}
	return fmt.Sprintf("pid %d", t.Pid)
}

// AcquireOptions is "client acquire -r RESOURCE ... -p PID|-C CLIENT_ID [--wait D]".
type AcquireOptions struct {
	IO *ClientIO
	LeaseArgs
	Target
	// Wait is our --wait: retry a busy lease until then (0: one attempt).
	Wait  time.Duration
	Debug bool // -D: a line on stderr per retry
}

func NewCmdAcquire(f *Factory, runF func(*AcquireOptions) error) *cobra.Command {
	return newClientCmd(f, "acquire", runF, acquireRun, func(o *options, io *ClientIO) *AcquireOptions {
		return &AcquireOptions{IO: io, LeaseArgs: leaseArgs(o), Target: targetOf(o), Wait: o.acquireWait, Debug: o.debug}
	})
}

func acquireRun(opts *AcquireOptions) error {
	c := opts.IO.connect()
	c.debug = opts.Debug
	return rvExit(c.acquire(opts))
}

// ConvertOptions is "client convert -r RESOURCE -p PID|-C CLIENT_ID".
type ConvertOptions struct {
	IO       *ClientIO
	Resource *client.Resource // the first -r; nil without one
	Target
}

func NewCmdConvert(f *Factory, runF func(*ConvertOptions) error) *cobra.Command {
	return newClientCmd(f, "convert", runF, convertRun, func(o *options, io *ClientIO) *ConvertOptions {
		return &ConvertOptions{IO: io, Resource: firstResource(o), Target: targetOf(o)}
	})
}

func convertRun(opts *ConvertOptions) error {
	return rvExit(opts.IO.connect().convert(opts.Target, opts.Resource))
}

// ReleaseOptions is "client release -r RESOURCE ... -p PID|-C CLIENT_ID", or all leases
// (-a 1), or orphans (-O 1, of -r or of the -s lockspace).
type ReleaseOptions struct {
	IO        *ClientIO
	Resources []client.Resource // every -r
	Lockspace string            // -s name (orphans of a lockspace)
	Target
	All    bool // -a nonzero
	Orphan bool // -O nonzero
}

func NewCmdRelease(f *Factory, runF func(*ReleaseOptions) error) *cobra.Command {
	return newClientCmd(f, "release", runF, releaseRun, func(o *options, io *ClientIO) *ReleaseOptions {
		return &ReleaseOptions{IO: io, Resources: o.resources, Lockspace: o.lockspace.Name, Target: targetOf(o),
			All: o.all != 0, Orphan: o.orphan != 0}
	})
}

func releaseRun(opts *ReleaseOptions) error { return rvExit(opts.IO.connect().release(opts)) }

// InquireOptions is "client inquire -p PID|-C CLIENT_ID [-D] [--json]".
type InquireOptions struct {
	IO *ClientIO
	Target
	Debug bool // -D: the state string parsed and rebuilt
	JSON  bool
}

func NewCmdInquire(f *Factory, runF func(*InquireOptions) error) *cobra.Command {
	return newClientCmd(f, "inquire", runF, inquireRun, func(o *options, io *ClientIO) *InquireOptions {
		return &InquireOptions{IO: io, Target: targetOf(o), Debug: o.debug, JSON: o.json}
	})
}

func inquireRun(opts *InquireOptions) error {
	c := opts.IO.connect()
	c.debug = opts.Debug
	if opts.JSON {
		return exitWith(c.inquireJSON(opts.Target))
	}
	return rvExit(c.inquire(opts.Target))
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

// ReexecOptions is "client reexec" (ours, docs/upgrade.md).
type ReexecOptions struct {
	IO   *ClientIO
	Path string // -e, refused: the daemon re-executes only its own binary
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
