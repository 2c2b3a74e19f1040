package manager

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/diskio"
	"github.com/gosanlock/gosanlock/paxos"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// DiskOps are the resource-area commands that work on disk without a
// client's lease set (docs/protocol.md "Commands" #19, #21, #24, #35–#40):
// writing and reading resource leases and the resource index operations.
// They open disks through Setup.Open (the lockspaces' Open) and ask the
// lockspaces for the membership an rindex lease needs; New builds them
// (Manager.Disk).
type DiskOps struct {
	ls *Lockspaces

	mu   sync.Mutex
	busy map[string]bool // lockspaces with an rindex operation running
}

func newDiskOps(ls *Lockspaces) *DiskOps {
	return &DiskOps{ls: ls, busy: make(map[string]bool)}
}

func (d *DiskOps) lg() *zap.Logger { return d.ls.lg() }

// writeInitIO is the write_init_io_timeout of WRITE_RESOURCE and
// FORMAT_RINDEX.
func (d *DiskOps) writeInitIO() int { return d.ls.conf().WriteInitIOTimeout }

// sizeFlagBits are the ALIGN/SECTOR bits of resource and rindex flags.
const sizeFlagBits = diskfmt.FlagSector512 | diskfmt.FlagSector4K | diskfmt.FlagAlign1M |
	diskfmt.FlagAlign2M | diskfmt.FlagAlign4M | diskfmt.FlagAlign8M

// openRaw opens a lease disk with Setup.Open. An open failure is returned
// as its -errno result code (sanlock logs "open error -2 <path>").
func (d *DiskOps) openRaw(path string) (diskfmt.Device, error) {
	dev, err := d.ls.Open(path)
	if err != nil {
		// "open error -2 <path>" is 3.8.5's wording.
		code := rescode.CodeOf(err)
		d.lg().Error(fmt.Sprintf("open error %d %s", code, path), causeField(err, 0))
		if code >= 0 {
			code = rescode.ErrENODEV
		}
		return nil, code
	}
	return dev, nil
}

// bound gives every single I/O on dev a deadline of ioTimeout seconds
// (DefaultIOTimeout when 0).
func (d *DiskOps) bound(dev diskfmt.Device, ioTimeout int) diskfmt.Device {
	if ioTimeout <= 0 {
		ioTimeout = DefaultIOTimeout
	}
	return diskio.WithIOTimeout(dev, time.Duration(ioTimeout)*time.Second)
}

// open is openRaw plus bound.
func (d *DiskOps) open(path string, ioTimeout int) (diskfmt.Device, error) {
	dev, err := d.openRaw(path)
	if err != nil {
		return nil, err
	}
	return d.bound(dev, ioTimeout), nil
}

// openDisks opens every disk of res (sanlock opens them all before any
// I/O, so any missing disk fails the command).
func (d *DiskOps) openDisks(res *wire.Resource, ioTimeout int) ([]diskfmt.ResourceDisk, func(), error) {
	var disks []diskfmt.ResourceDisk
	closeAll := func() {
		for _, dk := range disks {
			_ = dk.Dev.Close()
		}
	}
	if len(res.Disks) == 0 || len(res.Disks) > diskfmt.MaxDisks {
		return nil, closeAll, rescode.Code(rescode.RvERANGE)
	}
	for _, dk := range res.Disks {
		dev, err := d.open(dk.Path, ioTimeout)
		if err != nil {
			closeAll()
			return nil, func() {}, err
		}
		disks = append(disks, diskfmt.ResourceDisk{Dev: dev, Offset: int64(dk.Offset)})
	}
	return disks, closeAll, nil
}

// resultErr is err as the result code it is sent as (nil for none): the
// error value the manager's API returns; a CauseError keeps its cause.
func resultErr(err error) error {
	c := rescode.CodeOf(err)
	if cause := Cause(err); cause != "" && c != 0 {
		return &CauseError{Code: c, Cause: cause}
	}
	return codeErr(c)
}

// paxosVersion is the leader version WRITE_RESOURCE writes (0: the default).
func (d *DiskOps) paxosVersion() uint32 { return d.ls.conf().PaxosVersion }

// WriteResource initialises the lease of res on its disks (WRITE_RESOURCE,
// docs/protocol.md "Commands" #19): numHosts is num_hosts (what libsanlock
// calls max_hosts); clear writes an invalidated lease (SANLK_WRITE_CLEAR).
func (d *DiskOps) WriteResource(ctx context.Context, res wire.Resource, numHosts uint32, clear bool) error {
	disks, closeAll, err := d.openDisks(&res, d.writeInitIO())
	defer closeAll()
	if err != nil {
		return err
	}
	p := diskfmt.PaxosInit{SpaceName: res.LockspaceName, ResourceName: res.Name, NumHosts: uint64(numHosts),
		Version: d.paxosVersion()}
	if clear {
		p.Clear, p.ClearTime = true, monoSeconds()
	}
	return resultErr(diskfmt.WriteResource(ctx, disks, res.Flags, p))
}

// ReadResource reads the leader of the lease of res (READ_RESOURCE,
// docs/protocol.md "Commands" #21, docs/paxos.md "read_resource"): on
// success res gets the names and lver of the leader and its size flags.
func (d *DiskOps) ReadResource(ctx context.Context, res *wire.Resource) error {
	disks, closeAll, err := d.openDisks(res, 0)
	defer closeAll()
	if err != nil {
		return err
	}
	dev := &dkReadErrDev{Device: disks[0].Dev}
	ld, flags, err := paxos.ReadResource(ctx, dev, disks[0].Offset, res.LockspaceName, res.Name, res.Flags)
	if err != nil {
		return dkReadErr(dev.err, err)
	}
	res.LockspaceName = diskfmt.NameString(ld.SpaceName[:])
	res.Name = diskfmt.NameString(ld.ResourceName[:])
	res.LVer = ld.Lver
	res.Flags = flags
	return nil
}

// ReadResourceOwners lists the owners of the lease of res
// (READ_RESOURCE_OWNERS, docs/protocol.md "Commands" #24, docs/paxos.md
// "read_resource_owners"): res gets the lver of the leader and SHARED when
// some holder is shared.
func (d *DiskOps) ReadResourceOwners(ctx context.Context, res *wire.Resource) ([]paxos.Owner, error) {
	disks, closeAll, err := d.openDisks(res, 0)
	defer closeAll()
	if err != nil {
		return nil, err
	}
	own, err := dkReadOwners(ctx, disks[0].Dev, disks[0].Offset, res)
	if err != nil {
		return nil, resultErr(err)
	}
	res.LVer = own.Lver
	if own.Shared {
		res.Flags |= wire.ResShared
	}
	return own.Owners, nil
}

// dkReadOwners reads the owners of the lease at off the way sanlock 3.8.5
// does (checked against it for all five geometries, zeroed and cleared
// leases, and reads past the end of the device): read one area with the
// sizes the caller gave, 512 and its legacy align standing in for missing
// ones; take the sizes recorded in the leader, whatever its magic; a size
// the caller gave that differs is -EINVAL, a guessed one that differs
// makes it read again with the leader's sizes, and a leader without valid
// sizes (a zeroed area) is -EINVAL too. Only then is the leader verified
// (magic, version, names, checksum) and the holders listed
// (paxos.ResourceOwners). A read past the end of the device is -EMSGSIZE.
func dkReadOwners(ctx context.Context, dev diskfmt.Device, off int64, res *wire.Resource) (paxos.Owners, error) {
	givenSS, givenAlign := diskfmt.SectorFromFlags(res.Flags), diskfmt.AlignFromFlags(res.Flags)
	ss, align := givenSS, givenAlign
	if ss == 0 {
		ss = diskfmt.SectorSize512
	}
	if align == 0 {
		align = diskfmt.LegacyAlign(ss)
	}
	for pass := 0; ; pass++ {
		if ss <= 0 || align <= 0 || align < ss {
			return paxos.Owners{}, rescode.ErrEINVAL
		}
		buf := make([]byte, align)
		if err := dev.ReadAt(ctx, buf, off); err != nil {
			if diskfmt.IsShortRead(err) {
				return paxos.Owners{}, rvEMSGSIZE
			}
			if rescode.CodeOf(err) == rescode.ErrGeneric {
				return paxos.Owners{}, fmt.Errorf("%w: %w", err, rescode.ErrEIO)
			}
			return paxos.Owners{}, err
		}
		ld, _ := diskfmt.DecodeLeader(buf)
		lss, lalign := int(ld.SectorSize), -1
		if g, err := diskfmt.GeometryFromLeader(&ld); err == nil {
			lalign = g.AlignSize
		}
		if lss != ss || lalign != align {
			if (givenSS != 0 && lss != givenSS) || (givenAlign != 0 && lalign != givenAlign) || pass > 0 {
				return paxos.Owners{}, rescode.ErrEINVAL
			}
			ss, align = lss, lalign
			continue
		}
		ld, err := diskfmt.VerifyPaxos(buf, res.LockspaceName, res.Name, 0)
		if err != nil {
			return paxos.Owners{}, err
		}
		return paxos.ResourceOwners(buf, &ld, ss), nil
	}
}

// rvEMSGSIZE is what sanlock answers for a read that ends past the end of
// the device.
const rvEMSGSIZE rescode.Code = -90

// dkReadErrDev keeps the last read error, which the paxos layer reports
// as a plain I/O error (-5) when it is not a timeout.
type dkReadErrDev struct {
	diskfmt.Device
	err error
}

func (d *dkReadErrDev) ReadAt(ctx context.Context, p []byte, off int64) error {
	err := d.Device.ReadAt(ctx, p, off)
	if err != nil {
		d.err = err
	}
	return err
}

// dkReadErr is the result sanlock gives for a failed read: -EMSGSIZE
// for a read past the end of the device, the errno of the read (e.g.
// -EINVAL for an O_DIRECT read at an unaligned offset), or else the
// result the paxos layer found.
func dkReadErr(readErr, err error) error {
	switch c := rescode.CodeOf(readErr); {
	case readErr == nil || c == rescode.ErrAIOTimeout:
		return resultErr(err)
	case diskfmt.IsShortRead(readErr):
		return rvEMSGSIZE
	case c < 0 && c > -200:
		return c
	}
	return resultErr(err)
}

// monoSeconds is CLOCK_MONOTONIC in whole seconds (the timestamp of a
// cleared lease).
func monoSeconds() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return uint64(ts.Sec)
}

// Align is ALIGN (docs/protocol.md "Commands" #12): the align size of the
// sector size of the disk at path; -ENODEV when it cannot be opened,
// -EINVAL for a sector size without one. The disk is opened directly (not
// through the lockspaces' opener), only to read its sector size.
func (d *DiskOps) Align(path string) (int, error) {
	if path == "" {
		return 0, rescode.ErrENODEV
	}
	f, err := diskio.OpenFile(path)
	if err != nil {
		return 0, rescode.ErrENODEV
	}
	sector := f.SectorSize()
	_ = f.Close()
	align := diskfmt.LegacyAlign(sector)
	if align < 0 {
		return 0, rescode.ErrEINVAL
	}
	return align, nil
}
