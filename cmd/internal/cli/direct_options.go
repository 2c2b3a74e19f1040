package cli

import (
	"bufio"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/diskfmt"
)

// The direct actions, one command each as the client actions are
// (client_options.go). Every direct action reads or writes storage with
// each I/O bounded by IOTimeout (-o, or the config file's io_timeout),
// and most take the sizes -Z/-A (SizeFlags, as request flags: a sector
// flag only for 512 or 4096, an align flag only when -A named a size).

// DirectIO is what a direct action reaches outside its options: stdout,
// the storage and the clocks.
type DirectIO struct {
	Out              *bufio.Writer
	OpenDevice       func(path string) (diskfmt.Device, error)
	Clock            func() clock.Clock
	MonotonicSeconds func() uint64
}

func (f *Factory) directIO() *DirectIO {
	return &DirectIO{Out: f.Out, OpenDevice: f.OpenDevice, Clock: f.Clock, MonotonicSeconds: f.MonotonicSeconds}
}

// direct is the helper of one direct action run: the I/O settings every
// action shares.
func (io *DirectIO) direct(ioTimeout int, sizeFlags uint32) *direct {
	return &direct{io: io, out: io.Out, ioTimeout: ioTimeout, sizeFlags: sizeFlags}
}

// newDirectCmd is the command of a direct action (see newClientCmd).
func newDirectCmd[O any](f *Factory, action string, runF func(*O) error, run func(*O) error,
	build func(*options, *DirectIO) *O) *cobra.Command {
	a, ok := directActionNamed(action)
	if !ok {
		panic("cli: no direct action " + action)
	}
	return newOptionsCmd(f, "direct", action, a.use, a.short, func(o *options) error {
		opts := build(o, f.directIO())
		if runF != nil {
			return runF(opts)
		}
		return run(opts)
	})
}

// newDirectActionCmd is the command of the direct action called name.
func newDirectActionCmd(f *Factory, name string) *cobra.Command {
	switch name {
	case "init":
		return NewCmdDirectInit(f, nil)
	case "init_host":
		return NewCmdDirectInitHost(f, nil)
	case "read_leader":
		return NewCmdDirectReadLeader(f, nil)
	case "dump":
		return NewCmdDirectDump(f, nil)
	case "format":
		return NewCmdDirectFormat(f, nil)
	case "lookup":
		return NewCmdDirectLookup(f, nil)
	case "update":
		return NewCmdDirectUpdate(f, nil)
	case "rebuild":
		return NewCmdDirectRebuild(f, nil)
	case "write_leader":
		return NewCmdDirectWriteLeader(f, nil)
	case "next_free":
		return NewCmdDirectNextFree(f, nil)
	case "acquire":
		return NewCmdDirectAcquire(f, nil)
	case "release":
		return NewCmdDirectRelease(f, nil)
	case "acquire_id":
		return NewCmdDirectAcquireID(f, nil)
	case "release_id":
		return NewCmdDirectReleaseID(f, nil)
	case "renew_id":
		return NewCmdDirectRenewID(f, nil)
	}
	panic("cli: no command for direct action " + name)
}

// done prints "<label> done <rv>" and returns rv.
func (d *direct) done(label string, rv int) int {
	fmt.Fprintf(d.out, "%s done %d\n", label, rv)
	return rv
}

// DirectInitOptions is "direct init -s LOCKSPACE | -r RESOURCE".
type DirectInitOptions struct {
	IO        *DirectIO
	IOTimeout int
	SizeFlags uint32
	Lockspace client.Lockspace // with a path: init the lockspace
	Resource  *client.Resource // else the first -r; nil without one
	NumHosts  int              // -n
	Clear     bool             // -z
	// LeaseIOTimeout is the io_timeout recorded in a lockspace: a nonzero
	// -o as given (a negative one wraps), else IOTimeout.
	LeaseIOTimeout uint16
	// DeltaVersion and PaxosVersion are the versions written, from
	// sanlock.conf (config.Config.DeltaCreateVersion, PaxosCreateVersion).
	DeltaVersion uint32
	PaxosVersion uint32
}

func NewCmdDirectInit(f *Factory, runF func(*DirectInitOptions) error) *cobra.Command {
	return newDirectCmd(f, "init", runF, directInitRun, func(o *options, io *DirectIO) *DirectInitOptions {
		return &DirectInitOptions{IO: io, IOTimeout: o.cfg.IOTimeout, SizeFlags: o.sizeFlags(), Lockspace: o.lockspace,
			Resource: firstResource(o), NumHosts: o.numHosts, Clear: o.clear, LeaseIOTimeout: o.leaseIOTimeout(),
			DeltaVersion: o.cfg.DeltaCreateVersion(), PaxosVersion: o.cfg.PaxosCreateVersion()}
	})
}

func directInitRun(opts *DirectInitOptions) error {
	d := opts.IO.direct(opts.IOTimeout, opts.SizeFlags)
	return rvExit(d.done("init", d.init(opts)))
}

// DirectReadLeaderOptions is "direct read_leader -s LOCKSPACE | -r RESOURCE".
type DirectReadLeaderOptions struct {
	IO        *DirectIO
	IOTimeout int
	SizeFlags uint32
	Lockspace client.Lockspace // with a path: the host_id's delta lease
	Resource  *client.Resource // else the first -r's leader; nil without one
}

func NewCmdDirectReadLeader(f *Factory, runF func(*DirectReadLeaderOptions) error) *cobra.Command {
	return newDirectCmd(f, "read_leader", runF, directReadLeaderRun, func(o *options, io *DirectIO) *DirectReadLeaderOptions {
		return &DirectReadLeaderOptions{IO: io, IOTimeout: o.cfg.IOTimeout, SizeFlags: o.sizeFlags(), Lockspace: o.lockspace,
			Resource: firstResource(o)}
	})
}

func directReadLeaderRun(opts *DirectReadLeaderOptions) error {
	return rvExit(opts.IO.direct(opts.IOTimeout, opts.SizeFlags).readLeader(opts.Lockspace, opts.Resource))
}

// DirectDumpOptions is "direct dump PATH[:OFFSET[:SIZE]] [-f N]".
type DirectDumpOptions struct {
	IO        *DirectIO
	IOTimeout int
	SizeFlags uint32
	Path      string // the first argument, unparsed
	Force     uint32 // -f: 1 bitmaps, requests and index entries; 2 also dblocks
}

func NewCmdDirectDump(f *Factory, runF func(*DirectDumpOptions) error) *cobra.Command {
	return newDirectCmd(f, "dump", runF, directDumpRun, func(o *options, io *DirectIO) *DirectDumpOptions {
		return &DirectDumpOptions{IO: io, IOTimeout: o.cfg.IOTimeout, SizeFlags: o.sizeFlags(), Path: o.pathArg, Force: o.force}
	})
}

func directDumpRun(opts *DirectDumpOptions) error {
	return rvExit(opts.IO.direct(opts.IOTimeout, opts.SizeFlags).dump(opts.Path, opts.Force))
}

// DirectNextFreeOptions is "direct next_free PATH[:OFFSET]".
type DirectNextFreeOptions struct {
	IO        *DirectIO
	IOTimeout int
	SizeFlags uint32
	Path      string // the first argument, unparsed
}

func NewCmdDirectNextFree(f *Factory, runF func(*DirectNextFreeOptions) error) *cobra.Command {
	return newDirectCmd(f, "next_free", runF, directNextFreeRun, func(o *options, io *DirectIO) *DirectNextFreeOptions {
		return &DirectNextFreeOptions{IO: io, IOTimeout: o.cfg.IOTimeout, SizeFlags: o.sizeFlags(), Path: o.pathArg}
	})
}

func directNextFreeRun(opts *DirectNextFreeOptions) error {
	return rvExit(opts.IO.direct(opts.IOTimeout, opts.SizeFlags).nextFree(opts.Path))
}

// ---- resource index ----

// DirectFormatOptions is "direct format -x RINDEX [-Z -A]".
type DirectFormatOptions struct {
	IO        *DirectIO
	IOTimeout int
	SizeFlags uint32
	RIndex    client.RIndex
}

func NewCmdDirectFormat(f *Factory, runF func(*DirectFormatOptions) error) *cobra.Command {
	return newDirectCmd(f, "format", runF, directFormatRun, func(o *options, io *DirectIO) *DirectFormatOptions {
		return &DirectFormatOptions{IO: io, IOTimeout: o.cfg.IOTimeout, SizeFlags: o.sizeFlags(), RIndex: o.rindex}
	})
}

func directFormatRun(opts *DirectFormatOptions) error {
	d := opts.IO.direct(opts.IOTimeout, opts.SizeFlags)
	return rvExit(d.done("format", d.format(opts.RIndex)))
}

// DirectLookupOptions is "direct lookup -x RINDEX [-e NAME:OFFSET]".
type DirectLookupOptions struct {
	IO        *DirectIO
	IOTimeout int
	RIndex    client.RIndex
	Entry     rentryArg // -e name[:offset]
}

func NewCmdDirectLookup(f *Factory, runF func(*DirectLookupOptions) error) *cobra.Command {
	return newDirectCmd(f, "lookup", runF, directLookupRun, func(o *options, io *DirectIO) *DirectLookupOptions {
		return &DirectLookupOptions{IO: io, IOTimeout: o.cfg.IOTimeout, RIndex: o.rindex, Entry: parseRentry(o.eventStr)}
	})
}

func directLookupRun(opts *DirectLookupOptions) error {
	return rvExit(opts.IO.direct(opts.IOTimeout, 0).lookup(opts.RIndex, opts.Entry))
}

// DirectUpdateOptions is "direct update -x RINDEX -e NAME[:OFFSET] [-z 0|1]".
type DirectUpdateOptions struct {
	IO        *DirectIO
	IOTimeout int
	RIndex    client.RIndex
	Entry     rentryArg // -e name[:offset]
	Remove    bool      // -z: remove the entry instead of adding it
}

func NewCmdDirectUpdate(f *Factory, runF func(*DirectUpdateOptions) error) *cobra.Command {
	return newDirectCmd(f, "update", runF, directUpdateRun, func(o *options, io *DirectIO) *DirectUpdateOptions {
		return &DirectUpdateOptions{IO: io, IOTimeout: o.cfg.IOTimeout, RIndex: o.rindex, Entry: parseRentry(o.eventStr),
			Remove: o.clear}
	})
}

func directUpdateRun(opts *DirectUpdateOptions) error {
	d := opts.IO.direct(opts.IOTimeout, 0)
	return rvExit(d.done("update", d.update(opts.RIndex, opts.Entry, opts.Remove)))
}

// DirectRebuildOptions is "direct rebuild -x RINDEX".
type DirectRebuildOptions struct {
	IO        *DirectIO
	IOTimeout int
	RIndex    client.RIndex
}

func NewCmdDirectRebuild(f *Factory, runF func(*DirectRebuildOptions) error) *cobra.Command {
	return newDirectCmd(f, "rebuild", runF, directRebuildRun, func(o *options, io *DirectIO) *DirectRebuildOptions {
		return &DirectRebuildOptions{IO: io, IOTimeout: o.cfg.IOTimeout, RIndex: o.rindex}
	})
}

func directRebuildRun(opts *DirectRebuildOptions) error {
	d := opts.IO.direct(opts.IOTimeout, 0)
	return rvExit(d.done("rebuild", d.rebuild(opts.RIndex)))
}

// ---- write_leader ----

// DirectWriteLeaderOptions is "direct write_leader -s LOCKSPACE | -r
// RESOURCE -F FILE [-f 0|1]".
type DirectWriteLeaderOptions struct {
	IO        *DirectIO
	IOTimeout int
	SizeFlags uint32
	Lockspace client.Lockspace // with a path: the host_id's delta lease
	Resource  *client.Resource // else the first -r's leader; nil without one
	File      string           // -F: the "<field> <value>" lines
	Force     uint32           // -f: keep the file's checksum
}

func NewCmdDirectWriteLeader(f *Factory, runF func(*DirectWriteLeaderOptions) error) *cobra.Command {
	return newDirectCmd(f, "write_leader", runF, directWriteLeaderRun, func(o *options, io *DirectIO) *DirectWriteLeaderOptions {
		return &DirectWriteLeaderOptions{IO: io, IOTimeout: o.cfg.IOTimeout, SizeFlags: o.sizeFlags(), Lockspace: o.lockspace,
			Resource: firstResource(o), File: o.file, Force: o.force}
	})
}

func directWriteLeaderRun(opts *DirectWriteLeaderOptions) error {
	return rvExit(opts.IO.direct(opts.IOTimeout, opts.SizeFlags).writeLeader(opts))
}

// ---- leases ----

// DirectAcquireOptions is "direct acquire -r RESOURCE -i HOST_ID -g GEN".
type DirectAcquireOptions struct {
	IO                  *DirectIO
	IOTimeout           int
	SizeFlags           uint32
	WatchdogFireTimeout int              // the config file's
	Resource            *client.Resource // the first -r; nil without one
	HostID              uint64           // -i
	Generation          uint64           // -g
}

func NewCmdDirectAcquire(f *Factory, runF func(*DirectAcquireOptions) error) *cobra.Command {
	return newDirectCmd(f, "acquire", runF, directAcquireRun, func(o *options, io *DirectIO) *DirectAcquireOptions {
		return &DirectAcquireOptions{IO: io, IOTimeout: o.cfg.IOTimeout, SizeFlags: o.sizeFlags(),
			WatchdogFireTimeout: o.cfg.WatchdogFireTimeout, Resource: firstResource(o), HostID: o.hostID, Generation: o.generation}
	})
}

func directAcquireRun(opts *DirectAcquireOptions) error {
	d := opts.IO.direct(opts.IOTimeout, opts.SizeFlags)
	return rvExit(d.done("acquire", d.acquire(opts)))
}

// DirectReleaseOptions is "direct release -r RESOURCE".
type DirectReleaseOptions struct {
	IO        *DirectIO
	IOTimeout int
	SizeFlags uint32
	Resource  *client.Resource // the first -r; nil without one
}

func NewCmdDirectRelease(f *Factory, runF func(*DirectReleaseOptions) error) *cobra.Command {
	return newDirectCmd(f, "release", runF, directReleaseRun, func(o *options, io *DirectIO) *DirectReleaseOptions {
		return &DirectReleaseOptions{IO: io, IOTimeout: o.cfg.IOTimeout, SizeFlags: o.sizeFlags(), Resource: firstResource(o)}
	})
}

func directReleaseRun(opts *DirectReleaseOptions) error {
	d := opts.IO.direct(opts.IOTimeout, opts.SizeFlags)
	return rvExit(d.done("release", d.release(opts.Resource)))
}

// DeltaOptions is what acquire_id, release_id and renew_id take: the -s
// lockspace with the host_id whose delta lease they act on.
type DeltaOptions struct {
	IO                  *DirectIO
	IOTimeout           int
	SizeFlags           uint32
	WatchdogFireTimeout int // the config file's
	Lockspace           client.Lockspace
}

func deltaOptions(o *options, io *DirectIO) DeltaOptions {
	return DeltaOptions{IO: io, IOTimeout: o.cfg.IOTimeout, SizeFlags: o.sizeFlags(),
		WatchdogFireTimeout: o.cfg.WatchdogFireTimeout, Lockspace: o.lockspace}
}

func (o *DeltaOptions) direct() *direct { return o.IO.direct(o.IOTimeout, o.SizeFlags) }

// DirectAcquireIDOptions is "direct acquire_id -s LOCKSPACE [-e HOST_NAME]".
type DirectAcquireIDOptions struct {
	DeltaOptions
	// HostName is -e (cut to 48 bytes), else the config file's
	// our_host_name; empty: a new "<uuid>.<nodename>".
	HostName string
}

func NewCmdDirectAcquireID(f *Factory, runF func(*DirectAcquireIDOptions) error) *cobra.Command {
	return newDirectCmd(f, "acquire_id", runF, directAcquireIDRun, func(o *options, io *DirectIO) *DirectAcquireIDOptions {
		name := o.cfg.OurHostName
		if o.eventStr != "" {
			name = truncName(o.eventStr)
		}
		return &DirectAcquireIDOptions{DeltaOptions: deltaOptions(o, io), HostName: name}
	})
}

func directAcquireIDRun(opts *DirectAcquireIDOptions) error {
	d := opts.direct()
	return rvExit(d.done("acquire_id", d.acquireID(&opts.DeltaOptions, opts.HostName)))
}

// DirectReleaseIDOptions is "direct release_id -s LOCKSPACE".
type DirectReleaseIDOptions struct{ DeltaOptions }

func NewCmdDirectReleaseID(f *Factory, runF func(*DirectReleaseIDOptions) error) *cobra.Command {
	return newDirectCmd(f, "release_id", runF, directReleaseIDRun, func(o *options, io *DirectIO) *DirectReleaseIDOptions {
		return &DirectReleaseIDOptions{deltaOptions(o, io)}
	})
}

func directReleaseIDRun(opts *DirectReleaseIDOptions) error {
	d := opts.direct()
	return rvExit(d.done("release_id", d.releaseID(&opts.DeltaOptions)))
}

// DirectRenewIDOptions is "direct renew_id -s LOCKSPACE".
type DirectRenewIDOptions struct{ DeltaOptions }

func NewCmdDirectRenewID(f *Factory, runF func(*DirectRenewIDOptions) error) *cobra.Command {
	return newDirectCmd(f, "renew_id", runF, directRenewIDRun, func(o *options, io *DirectIO) *DirectRenewIDOptions {
		return &DirectRenewIDOptions{deltaOptions(o, io)}
	})
}

func directRenewIDRun(opts *DirectRenewIDOptions) error {
	d := opts.direct()
	return rvExit(d.done("rewew_id", d.renewID(&opts.DeltaOptions))) // sic, as sanlock prints it
}
