package cli

import (
	"context"
	"github.com/spf13/cobra"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

// init_host (sanlock 5.x): write one host's delta lease, through the
// daemon (INIT_LOCKSPACE_HOST) or directly. -s names the lockspace and
// the host_id; -g the generation, -t the timestamp, -e the host name
// (client only), -N 1 the NO_TIMEOUT mark (5.x delta versions only), -C
// 0|1 NO_CAW/USE_CAW: we write no CAW mark either way (docs/compat.md
// "CAW").

// InitHostOptions is "client init_host -s LOCKSPACE [-g GEN] [-t TS] [-N 1] [-e NAME] [-Z -A] [-C 0|1]".
type InitHostOptions struct {
	IO         *ClientIO
	Lockspace  client.Lockspace
	SizeFlags  uint32
	Generation uint64
	Timestamp  uint64
	HostName   string
	NoTimeout  bool
	CAW        int // -C: 1 USE_CAW, 0 NO_CAW, -1 not given
	IOTimeout  int // -o as given (0: the daemon's)
}

func cawArg(o *options) int {
	if !o.clientIDSet {
		return -1
	}
	if o.clientID != 0 {
		return 1
	}
	return 0
}

func NewCmdInitHost(f *Factory, runF func(*InitHostOptions) error) *cobra.Command {
	return newClientCmd(f, "init_host", runF, initHostRun, func(o *options, io *ClientIO) *InitHostOptions {
		return &InitHostOptions{IO: io, Lockspace: o.lockspace, SizeFlags: o.sizeFlags(), Generation: o.generation,
			Timestamp: o.timestamp, HostName: o.eventStr, NoTimeout: o.nodelay != 0, CAW: cawArg(o), IOTimeout: o.ioTimeoutArg}
	})
}

func initHostRun(opts *InitHostOptions) error {
	c := opts.IO.connect()
	ls := opts.Lockspace
	ls.Flags = opts.SizeFlags
	if opts.NoTimeout {
		ls.Flags |= lsfNoTimeout
	}
	var flags uint32
	switch opts.CAW {
	case 0:
		flags = client.InitHostNoCAW
	case 1:
		flags = client.InitHostUseCAW
	}
	r := c.call(func() error {
		return c.cl.InitLockspaceHost(context.Background(), &ls, flags, uint32(opts.IOTimeout), opts.Generation, opts.HostName, opts.Timestamp)
	})
	c.printf("init_host done %d\n", r)
	return rvExit(r)
}

// lsfNoTimeout is SANLK_LSF_NO_TIMEOUT in a lockspace's flags.
const lsfNoTimeout = 0x4

// DirectInitHostOptions is "direct init_host -s LOCKSPACE [-g GEN] [-t TS] [-N 1] [-Z -A] [-C 0|1]".
type DirectInitHostOptions struct {
	IO         *DirectIO
	IOTimeout  int
	SizeFlags  uint32
	Lockspace  client.Lockspace
	Generation uint64
	Timestamp  uint64
	HostName   string // -e
	NoTimeout  bool
	// LeaseIOTimeout is the io_timeout written (as direct init's).
	LeaseIOTimeout uint16
	DeltaVersion   uint32
}

func NewCmdDirectInitHost(f *Factory, runF func(*DirectInitHostOptions) error) *cobra.Command {
	return newDirectCmd(f, "init_host", runF, directInitHostRun, func(o *options, io *DirectIO) *DirectInitHostOptions {
		return &DirectInitHostOptions{IO: io, IOTimeout: o.cfg.IOTimeout, SizeFlags: o.sizeFlags(), Lockspace: o.lockspace,
			Generation: o.generation, Timestamp: o.timestamp, HostName: o.eventStr, NoTimeout: o.nodelay != 0,
			LeaseIOTimeout: o.leaseIOTimeout(), DeltaVersion: o.cfg.DeltaCreateVersion()}
	})
}

// directInitHostRun prints "init done N", as 5.1.1's direct init_host.
func directInitHostRun(opts *DirectInitHostOptions) error {
	d := opts.IO.direct(opts.IOTimeout, opts.SizeFlags)
	return rvExit(d.done("init", d.initHost(opts)))
}

func (d *direct) initHost(o *DirectInitHostOptions) int {
	ls := o.Lockspace
	if ls.Disk.Path == "" || ls.HostID == 0 || ls.Name == "" {
		return int(rescode.ErrEINVAL)
	}
	if halfSizes(d.sizeFlags) {
		return int(rescode.ErrEPERM)
	}
	dev, err := d.open(ls.Disk.Path)
	if err != nil {
		return int(rescode.ErrENODEV)
	}
	defer dev.Close()
	g, err := diskfmt.GeometryForWrite(d.sizeFlags, dev.SectorSize())
	if err != nil {
		return rvOf(err)
	}
	ctx, cancel := d.ioContext()
	defer cancel()
	return rvOf(diskfmt.WriteDeltaHost(ctx, dev, int64(ls.Disk.Offset), diskfmt.DeltaHost{
		Geometry: g, Space: ls.Name, HostID: ls.HostID, Generation: o.Generation, HostName: o.HostName,
		Timestamp: o.Timestamp, IOTimeout: o.LeaseIOTimeout, Version: o.DeltaVersion, NoTimeout: o.NoTimeout}))
}
