package cli

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/diskio"
	"github.com/gosanlock/gosanlock/paxos"
	"github.com/gosanlock/gosanlock/rescode"
)

// Result values the direct tool reports that diskfmt has no name for.
const (
	rvEMSGSIZE = -90 // a read that ended past the end of the device
)

// direct runs one "sanlock direct" action (made by DirectIO.direct).
type direct struct {
	io        *DirectIO
	out       *bufio.Writer
	ioTimeout int    // seconds, each I/O (-o)
	sizeFlags uint32 // -Z/-A as request flags
}

// open opens a disk whose every I/O is bounded by the io_timeout.
func (d *direct) open(path string) (diskfmt.Device, error) {
	dev, err := d.io.OpenDevice(path)
	if err != nil {
		return nil, err
	}
	return diskio.WithIOTimeout(dev, time.Duration(d.ioTimeout)*time.Second), nil
}

// monotonicSeconds is the writer's monotonic clock in whole seconds, as
// recorded in a cleared lease.
func monotonicSeconds() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return uint64(ts.Sec)
}

// ioContext is the context of a disk operation; each I/O adds its own
// io_timeout deadline (diskio.WithIOTimeout).
func (d *direct) ioContext() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}

// rvOf maps an error to the result the tool prints.
func rvOf(err error) int {
	if err == nil {
		return 0
	}
	if diskfmt.IsShortRead(err) {
		return rvEMSGSIZE
	}
	return int(rescode.CodeOf(err))
}

// halfSizes reports -Z/-A flags that name only one of the two sizes, which
// every writer rejects with -1 before touching the disk.
func halfSizes(flags uint32) bool {
	return (diskfmt.SectorFromFlags(flags) == 0) != (diskfmt.AlignFromFlags(flags) == 0)
}

// init writes a lockspace (-s with a path) or else a resource lease (-r).
func (d *direct) init(o *DirectInitOptions) int {
	flags := d.sizeFlags
	if o.Lockspace.Disk.Path != "" {
		if halfSizes(flags) {
			return int(rescode.ErrEPERM)
		}
		dev, err := d.open(o.Lockspace.Disk.Path)
		if err != nil {
			return int(rescode.ErrENODEV)
		}
		defer dev.Close()
		ctx, cancel := d.ioContext()
		defer cancel()
		return rvOf(diskfmt.WriteLockspace(ctx, dev, int64(o.Lockspace.Disk.Offset), flags,
			o.Lockspace.Name, o.LeaseIOTimeout, o.DeltaVersion))
	}
	if o.Resource == nil {
		return int(rescode.ErrEINVAL)
	}
	r := *o.Resource
	if halfSizes(flags) {
		return int(rescode.ErrEPERM)
	}
	if len(r.Disks) == 0 {
		return int(rescode.ErrENODEV)
	}
	var disks []diskfmt.ResourceDisk
	for _, dk := range r.Disks {
		dev, err := d.open(dk.Path)
		if err != nil {
			return rvOf(err)
		}
		defer dev.Close()
		disks = append(disks, diskfmt.ResourceDisk{Dev: dev, Offset: int64(dk.Offset)})
	}
	p := diskfmt.PaxosInit{
		SpaceName:    r.LockspaceName,
		ResourceName: r.Name,
		NumHosts:     uint64(int64(o.NumHosts)),
		Version:      o.PaxosVersion,
	}
	if o.NumHosts < 0 {
		p.NumHosts = 0
	}
	if o.Clear {
		p.Clear = true
		p.ClearTime = d.io.MonotonicSeconds()
	}
	ctx, cancel := d.ioContext()
	defer cancel()
	return rvOf(diskfmt.WriteResource(ctx, disks, flags, p))
}

// readLeader prints "read_leader done <rv>" and the leader fields, which
// are all zero when nothing could be read.
func (d *direct) readLeader(ls client.Lockspace, res *client.Resource) int {
	var (
		l     diskfmt.Leader
		rv    int
		delta = true
	)
	switch {
	case ls.Disk.Path != "":
		l, rv = d.readDeltaLeader(ls)
	case res != nil:
		delta = false
		l, rv = d.readResourceLeader(*res)
	default:
		rv = int(rescode.ErrEPERM)
	}
	fmt.Fprintf(d.out, "read_leader done %d\n", rv)
	printLeader(d.out, &l, delta)
	return rv
}

func (d *direct) readDeltaLeader(ls client.Lockspace) (diskfmt.Leader, int) {
	if ls.HostID == 0 {
		return diskfmt.Leader{}, int(rescode.ErrEINVAL)
	}
	dev, err := d.open(ls.Disk.Path)
	if err != nil {
		return diskfmt.Leader{}, int(rescode.ErrENODEV)
	}
	defer dev.Close()
	ctx, cancel := d.ioContext()
	defer cancel()
	g, ok := diskfmt.GeometryFromFlags(d.sizeFlags)
	if !ok {
		l, err := diskfmt.ProbeLeader(ctx, dev, int64(ls.Disk.Offset))
		if err != nil {
			return diskfmt.Leader{}, rvOf(err)
		}
		if l.Magic != diskfmt.DeltaMagic && l.Magic != diskfmt.PaxosMagic {
			return diskfmt.Leader{}, int(rescode.ErrEPERM)
		}
		if g, err = diskfmt.GeometryFromLeader(&l); err != nil {
			// A leader with an unusable sector size: the sector read
			// that follows fails with EINVAL in sanlock.
			return diskfmt.Leader{}, int(rescode.ErrEINVAL)
		}
	}
	l, raw, err := diskfmt.ReadDeltaLeader(ctx, dev, int64(ls.Disk.Offset), g, ls.Name, ls.HostID)
	if err != nil && len(raw) >= diskfmt.LeaderSize {
		l, _ = diskfmt.DecodeLeader(raw)
	}
	return l, rvOf(err)
}

func (d *direct) readPaxosLeader(r client.Resource) (diskfmt.Leader, int) {
	if len(r.Disks) == 0 {
		return diskfmt.Leader{}, int(rescode.ErrEPERM)
	}
	dev, err := d.open(r.Disks[0].Path)
	if err != nil {
		return diskfmt.Leader{}, rvOf(err)
	}
	defer dev.Close()
	ss := diskfmt.SectorSize4K
	if g, ok := diskfmt.GeometryFromFlags(d.sizeFlags); ok {
		ss = g.SectorSize
	}
	ctx, cancel := d.ioContext()
	defer cancel()
	l, raw, err := diskfmt.ReadPaxosLeader(ctx, dev, int64(r.Disks[0].Offset), ss, r.LockspaceName, r.Name, 0)
	if err != nil {
		if diskfmt.IsShortRead(err) || len(raw) < diskfmt.LeaderSize {
			return diskfmt.Leader{}, rvOf(err)
		}
		l, _ = diskfmt.DecodeLeader(raw)
	}
	return l, rvOf(err)
}

// readResourceLeader is the leader of a resource as read_leader -r reads
// it: on one disk that disk's (readPaxosLeader), on several the one a
// majority agrees on (readPaxosLeaders).
func (d *direct) readResourceLeader(r client.Resource) (diskfmt.Leader, int) {
	if len(r.Disks) > 1 {
		return d.readPaxosLeaders(r)
	}
	return d.readPaxosLeader(r)
}

// readPaxosLeaders reads the leader of a resource on several disks as
// sanlock 3.8.5's read_leader does: the leader a majority of the disks
// agree on, read by the leader I/O of a ballot (paxos.ReadLeader,
// docs/paxos.md "Several disks"), one sector of the -Z size, else 4096
// bytes, from each. A disk that cannot be opened counts as a failed read;
// when too few can be opened for a majority, the result is the open error
// (leaderDisks). On failure (SANLK_LEADER_READ: too few leaders verify;
// SANLK_LEADER_DIFF: no majority is identical) no disk's leader is
// printed: the fields are all zero.
func (d *direct) readPaxosLeaders(r client.Resource) (diskfmt.Leader, int) {
	ss := diskfmt.SectorSize4K
	if g, ok := diskfmt.GeometryFromFlags(d.sizeFlags); ok {
		ss = g.SectorSize
	}
	disks, rv := d.leaderDisks(&r)
	if rv != 0 {
		// sanlock reads nothing then (and prints an uninitialised
		// leader)
		return diskfmt.Leader{}, rv
	}
	defer closeDisks(disks)
	ctx, cancel := d.ioContext()
	defer cancel()
	lio := paxos.LeaderIO{Disks: disks, SectorSize: ss, IOTimeout: time.Duration(d.ioTimeout) * time.Second}
	l, err := paxos.ReadLeader(ctx, lio, r.LockspaceName, r.Name, 0)
	if err != nil {
		return diskfmt.Leader{}, rvOf(err)
	}
	return l, 0
}

// printLeader prints the leader fields in read_leader's order; delta
// leases end with extra1..3, paxos leases with write_*. A leader in a
// format only sanlock 5.x writes (Leader.NewFormat) is printed as 5.x
// prints it: the flags' names after their value and an unused1 line;
// any other as 3.8.5 prints it (docs/compat.md "On-disk format versions").
func printLeader(w *bufio.Writer, l *diskfmt.Leader, delta bool) {
	newFormat := l.NewFormat()
	fmt.Fprintf(w, "magic 0x%x\n", l.Magic)
	fmt.Fprintf(w, "version 0x%x\n", l.Version)
	if newFormat {
		fmt.Fprintf(w, "flags 0x%x%s\n", l.Flags, flagNamesText(l.Flags))
	} else {
		fmt.Fprintf(w, "flags 0x%x\n", l.Flags)
	}
	fmt.Fprintf(w, "sector_size %d\n", l.SectorSize)
	fmt.Fprintf(w, "num_hosts %d\n", l.NumHosts)
	fmt.Fprintf(w, "max_hosts %d\n", l.MaxHosts)
	fmt.Fprintf(w, "owner_id %d\n", l.OwnerID)
	fmt.Fprintf(w, "owner_generation %d\n", l.OwnerGeneration)
	fmt.Fprintf(w, "lver %d\n", l.Lver)
	fmt.Fprintf(w, "space_name %s\n", diskfmt.NameString(l.SpaceName[:]))
	fmt.Fprintf(w, "resource_name %s\n", diskfmt.NameString(l.ResourceName[:]))
	fmt.Fprintf(w, "timestamp %d\n", l.Timestamp)
	if newFormat {
		fmt.Fprintf(w, "unused1 0x%x\n", l.Unused1)
	}
	fmt.Fprintf(w, "checksum 0x%x\n", l.Checksum)
	fmt.Fprintf(w, "io_timeout %d\n", l.IOTimeout)
	if delta {
		fmt.Fprintf(w, "extra1 %d\n", l.WriteID)
		fmt.Fprintf(w, "extra2 %d\n", l.WriteGeneration)
		fmt.Fprintf(w, "extra3 %d\n", l.WriteTimestamp)
	} else {
		fmt.Fprintf(w, "write_id %d\n", l.WriteID)
		fmt.Fprintf(w, "write_generation %d\n", l.WriteGeneration)
		fmt.Fprintf(w, "write_timestamp %d\n", l.WriteTimestamp)
	}
}

// flagNamesText is how sanlock 5.x follows a leader's flags value: nothing
// for 0, else " [ " and the name of each known bit set, each followed by
// a blank, then "]" (" [ ]" when only unknown bits are set).
func flagNamesText(flags uint32) string {
	if flags == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(" [ ")
	for _, n := range diskfmt.LeaderFlagNames(flags) {
		b.WriteString(n)
		b.WriteByte(' ')
	}
	b.WriteByte(']')
	return b.String()
}

// format writes an empty resource index.
func (d *direct) format(ri client.RIndex) int {
	dev, err := d.open(ri.Disk.Path)
	if err != nil {
		return rvOf(err)
	}
	defer dev.Close()
	flags := d.sizeFlags
	if halfSizes(flags) {
		return int(rescode.ErrEPERM)
	}
	ctx, cancel := d.ioContext()
	defer cancel()
	return rvOf(diskfmt.FormatRindex(ctx, dev, int64(ri.Disk.Offset), flags, ri.LockspaceName, 0))
}

// openRindex opens the -x index; the caller closes rx.Dev.
func (d *direct) openRindex(ctx context.Context, rxa client.RIndex) (*diskfmt.Rindex, int) {
	dev, err := d.open(rxa.Disk.Path)
	if err != nil {
		return nil, rvOf(err)
	}
	rx, err := diskfmt.OpenRindex(ctx, dev, int64(rxa.Disk.Offset), rxa.LockspaceName, 0)
	if err != nil {
		dev.Close()
		return nil, rvOf(err)
	}
	return rx, 0
}

func (d *direct) rebuild(ri client.RIndex) int {
	ctx, cancel := d.ioContext()
	defer cancel()
	rx, rv := d.openRindex(ctx, ri)
	if rv != 0 {
		return rv
	}
	defer rx.Dev.Close()
	return rvOf(rx.Rebuild(ctx))
}

func (d *direct) lookup(ri client.RIndex, e rentryArg) int {
	ctx, cancel := d.ioContext()
	defer cancel()
	var found diskfmt.RindexEntry
	rx, rv := d.openRindex(ctx, ri)
	if rv == 0 {
		defer rx.Dev.Close()
		var err error
		found, err = rx.Lookup(ctx, e.Name, e.Offset)
		rv = rvOf(err)
	}
	fmt.Fprintf(d.out, "lookup done %d\n", rv)
	if rv == 0 {
		name := diskfmt.NameString(found.Name[:])
		if name == "" {
			name = "-"
		}
		fmt.Fprintf(d.out, "name %s offset %d\n", name, found.ResOffset)
	}
	return rv
}

func (d *direct) update(ri client.RIndex, e rentryArg, remove bool) int {
	ctx, cancel := d.ioContext()
	defer cancel()
	rx, rv := d.openRindex(ctx, ri)
	if rv != 0 {
		return rv
	}
	defer rx.Dev.Close()
	return rvOf(rx.UpdateEntry(ctx, e.Name, e.Offset, remove))
}
