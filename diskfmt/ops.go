package diskfmt

import (
	"context"
	"errors"
	"io"

	"github.com/gosanlock/gosanlock/rescode"
)

// This file holds the whole-area operations that both the direct tool and
// the daemon perform: initialising lockspaces and resources, reading leaders
// and detecting sizes. Each takes the I/O context from the caller.

// WriteLockspace initialises the lockspace at off: one align-size write with
// every delta lease free, then the commit of sector 0. Sizes come from the
// request flags and the device (GeometryForWrite); version is the delta
// lease version written (0: DeltaVersion).
func WriteLockspace(ctx context.Context, dev Device, off int64, flags uint32, space string, ioTimeout uint16, version uint32) error {
	g, err := GeometryForWrite(flags, dev.SectorSize())
	if err != nil {
		return err
	}
	area, commit, err := InitDeltaArea(DeltaInit{Geometry: g, SpaceName: space, IOTimeout: ioTimeout, Version: version})
	if err != nil {
		return err
	}
	if err := dev.WriteAt(ctx, area, off); err != nil {
		return err
	}
	return dev.WriteAt(ctx, commit, off)
}

// ResourceDisk is one disk of a resource lease.
type ResourceDisk struct {
	Dev    Device
	Offset int64
}

// WriteResource initialises a resource lease (or, with p.Clear, invalidates
// it) on every disk: one align-size write each. p.Geometry is filled from
// flags and the first disk's sector size.
func WriteResource(ctx context.Context, disks []ResourceDisk, flags uint32, p PaxosInit) error {
	if len(disks) == 0 || len(disks) > MaxDisks {
		return rescode.ErrEINVAL
	}
	g, err := GeometryForWrite(flags, disks[0].Dev.SectorSize())
	if err != nil {
		return err
	}
	p.Geometry = g
	area, err := InitPaxosArea(p)
	if err != nil {
		return err
	}
	for _, d := range disks {
		if err := d.Dev.WriteAt(ctx, area, d.Offset); err != nil {
			return err
		}
	}
	return nil
}

// ReadSector reads one sector of size ss at off.
func ReadSector(ctx context.Context, dev Device, off int64, ss int) ([]byte, error) {
	b := make([]byte, ss)
	return b, dev.ReadAt(ctx, b, off)
}

// probeSize is how much sanlock reads to find a leader when it does not
// know the sizes yet: enough for either sector size.
const probeSize = 4096

// ProbeLeader reads 4096 bytes at off and decodes the leader there without
// validating it. A read past the end of the device is an error.
func ProbeLeader(ctx context.Context, dev Device, off int64) (Leader, error) {
	b := make([]byte, probeSize)
	if err := dev.ReadAt(ctx, b, off); err != nil {
		return Leader{}, err
	}
	return DecodeLeader(b)
}

// LockspaceGeometry returns the sizes of the lockspace at off as the daemon
// derives them when it joins: from the leader of sector 0 (magic and major
// version must be those of a delta lease, DeltaVersionKnown), ignoring
// caller flags.
func LockspaceGeometry(ctx context.Context, dev Device, off int64) (Geometry, error) {
	l, err := ProbeLeader(ctx, dev, off)
	if err != nil {
		return Geometry{}, err
	}
	if l.Magic != DeltaMagic {
		return Geometry{}, rescode.ErrLeaderMagic
	}
	if !DeltaVersionKnown(l.Version) {
		return Geometry{}, rescode.ErrLeaderVersion
	}
	return GeometryFromLeader(&l)
}

// GeometryFromFlags returns the sizes named by request flags when both a
// sector and an align flag are set and form a valid pair.
func GeometryFromFlags(flags uint32) (Geometry, bool) {
	s, a := SectorFromFlags(flags), AlignFromFlags(flags)
	if s == 0 || a == 0 {
		return Geometry{}, false
	}
	return LookupGeometry(s, a)
}

// DetectLeaderGeometry is the size probe of the direct tools: a 4096-byte
// read at off whose leader has delta or paxos magic gives the sizes. It
// returns ErrEPERM (-1) when no such leader is there.
func DetectLeaderGeometry(ctx context.Context, dev Device, off int64) (Geometry, error) {
	l, err := ProbeLeader(ctx, dev, off)
	if err != nil {
		return Geometry{}, rescode.ErrEPERM
	}
	if l.Magic != DeltaMagic && l.Magic != PaxosMagic {
		return Geometry{}, rescode.ErrEPERM
	}
	g, err := GeometryFromLeader(&l)
	if err != nil {
		return Geometry{}, rescode.ErrEPERM
	}
	return g, nil
}

// ReadDeltaLeader reads and verifies the delta lease of hostID (sector
// hostID-1). It returns the raw sector too, so callers can print what was
// read even when verification fails.
func ReadDeltaLeader(ctx context.Context, dev Device, off int64, g Geometry, space string, hostID uint64) (Leader, []byte, error) {
	if hostID == 0 {
		return Leader{}, nil, rescode.ErrEINVAL
	}
	b, err := ReadSector(ctx, dev, off+DeltaSectorOffset(hostID, g.SectorSize), g.SectorSize)
	if err != nil {
		return Leader{}, b, err
	}
	l, err := VerifyDelta(b, space)
	return l, b, err
}

// ReadPaxosLeader reads and verifies the leader of a resource lease at off.
func ReadPaxosLeader(ctx context.Context, dev Device, off int64, ss int, space, res string, hostID uint64) (Leader, []byte, error) {
	b, err := ReadSector(ctx, dev, off, ss)
	if err != nil {
		return Leader{}, b, err
	}
	l, err := VerifyPaxos(b, space, res, hostID)
	return l, b, err
}

// IsShortRead reports whether err is a read that ran past the end of the
// device.
func IsShortRead(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }
