package diskfmt

import (
	"context"

	"github.com/gosanlock/gosanlock/rescode"
)

// DeltaHost is one host's delta lease as 5.x's init_host writes it
// (INIT_LOCKSPACE_HOST, "direct init_host").
type DeltaHost struct {
	Geometry   Geometry
	Space      string // lockspace name
	HostID     uint64 // 1..Geometry.MaxHosts: the sector and the owner
	Generation uint64
	HostName   string // the owner's host name (may be empty)
	Timestamp  uint64
	IOTimeout  uint16
	Version    uint32 // 0: DeltaVersion
	// NoTimeout sets the NO_TIMEOUT leader flag; only a 5.x version may
	// carry it (rescode.ErrEINVAL with 3.4, as 5.1.1 answers).
	NoTimeout bool
}

// DeltaHostSector builds the sector of h: the leader with magic,
// version, align flag (and NO_TIMEOUT), sector size, max_hosts 1, owner
// host_id and generation, names, timestamp and io_timeout, sealed. No CAW
// mark is ever written (docs/compat.md "CAW").
func DeltaHostSector(h DeltaHost) ([]byte, error) {
	g := h.Geometry
	if h.HostID == 0 || g.SectorSize == 0 || h.HostID > uint64(g.MaxHosts) {
		return nil, rescode.ErrEINVAL
	}
	space, err := Name(h.Space)
	if err != nil {
		return nil, rescode.ErrEINVAL
	}
	name, err := Name(h.HostName)
	if err != nil {
		return nil, rescode.ErrEINVAL
	}
	version := h.Version
	if version == 0 {
		version = DeltaVersion
	}
	flags := AlignFlag(g.AlignSize)
	if h.NoTimeout {
		if VersionMajor(version) < VersionMajor(DeltaVersion50) {
			return nil, rescode.ErrEINVAL
		}
		flags |= LeaderNoTimeout
	}
	l := Leader{
		Magic: DeltaMagic, Version: version, Flags: flags, SectorSize: uint32(g.SectorSize), MaxHosts: 1,
		OwnerID: h.HostID, OwnerGeneration: h.Generation, SpaceName: space, ResourceName: name,
		Timestamp: h.Timestamp, IOTimeout: h.IOTimeout,
	}
	b := make([]byte, g.SectorSize)
	l.Seal(b)
	return b, nil
}

// WriteDeltaHost writes the sector of h into the lockspace at off.
func WriteDeltaHost(ctx context.Context, dev Device, off int64, h DeltaHost) error {
	b, err := DeltaHostSector(h)
	if err != nil {
		return err
	}
	return dev.WriteAt(ctx, b, off+DeltaSectorOffset(h.HostID, h.Geometry.SectorSize))
}
