package diskfmt

import (
	"fmt"

	"github.com/gosanlock/gosanlock/rescode"
)

// Sector and align sizes.
const (
	SectorSize512 = 512
	SectorSize4K  = 4096

	MiB     = 1 << 20
	Align1M = 1 * MiB
	Align2M = 2 * MiB
	Align4M = 4 * MiB
	Align8M = 8 * MiB

	// DefaultMaxHosts is max_hosts when the caller gives no sizes.
	DefaultMaxHosts = 2000
	// MaxDisks is the most disks one resource lease may span.
	MaxDisks = 4
	// NameLen is the size of every lockspace, resource and host name field.
	NameLen = 48
	// MaxPathLen is the longest path the tools accept (bytes, without NUL).
	MaxPathLen = 1023
)

// Size flags carried in request flags (sanlk_lockspace, sanlk_resource and
// sanlk_rindex use the same bit values).
const (
	FlagAlign1M   uint32 = 0x10
	FlagAlign2M   uint32 = 0x20
	FlagAlign4M   uint32 = 0x40
	FlagAlign8M   uint32 = 0x80
	FlagSector512 uint32 = 0x100
	FlagSector4K  uint32 = 0x200

	alignFlagMask  = FlagAlign1M | FlagAlign2M | FlagAlign4M | FlagAlign8M
	sectorFlagMask = FlagSector512 | FlagSector4K
)

// Geometry is a validated (sector size, align size) pair and the max_hosts
// it allows.
type Geometry struct {
	SectorSize int
	AlignSize  int
	MaxHosts   int
}

// SectorsPerArea is the number of sectors in one align-size area.
func (g Geometry) SectorsPerArea() int { return g.AlignSize / g.SectorSize }

// String renders the pair the way the CLI error message does ("512/1048576").
func (g Geometry) String() string { return fmt.Sprintf("%d/%d", g.SectorSize, g.AlignSize) }

var geometries = []Geometry{
	{512, Align1M, 2000},
	{4096, Align1M, 250},
	{4096, Align2M, 500},
	{4096, Align4M, 1000},
	{4096, Align8M, 2000},
}

// Geometries lists the five valid pairs, in the order the tools print them.
func Geometries() []Geometry { return append([]Geometry(nil), geometries...) }

// LookupGeometry returns the geometry for a sector/align pair and whether the
// pair is one of the five valid ones.
func LookupGeometry(sector, align int) (Geometry, bool) {
	for _, g := range geometries {
		if g.SectorSize == sector && g.AlignSize == align {
			return g, true
		}
	}
	return Geometry{}, false
}

// LegacyAlign is the align size implied by a sector size when nothing records
// one (leaders written before align flags existed, or callers that give no
// sizes): 512 → 1 MiB, 4096 → 8 MiB, anything else → -1.
func LegacyAlign(sector int) int {
	switch sector {
	case SectorSize512:
		return Align1M
	case SectorSize4K:
		return Align8M
	}
	return -1
}

// The four align sizes, in the order every flag field encodes them: the
// request flags, the leader's LFL_ALIGN_* and the rindex's RHF_ALIGN_* are
// each four consecutive bits (from different base bits) in this order.
var alignSizes = [4]int{Align1M, Align2M, Align4M, Align8M}

// alignBits encodes align as one bit of a four-bit field starting at base;
// 0 for an unknown size.
func alignBits(align int, base uint32) uint32 {
	for i, a := range alignSizes {
		if a == align {
			return base << i
		}
	}
	return 0
}

// alignFromBits decodes a four-bit align field starting at base, taking the
// first match in the order 1M, 2M, 4M, 8M; 0 when no bit is set.
func alignFromBits(flags, base uint32) int {
	for i, a := range alignSizes {
		if flags&(base<<i) != 0 {
			return a
		}
	}
	return 0
}

// AlignFromFlags decodes the align size from SANLK_*_ALIGN* request flag
// bits (first match 1M, 2M, 4M, 8M); 0 when none is set.
func AlignFromFlags(flags uint32) int { return alignFromBits(flags, FlagAlign1M) }

// SectorFromFlags decodes the sector size from SANLK_*_SECTOR* flag bits
// (512 first); 0 when none is set.
func SectorFromFlags(flags uint32) int {
	switch {
	case flags&FlagSector512 != 0:
		return SectorSize512
	case flags&FlagSector4K != 0:
		return SectorSize4K
	}
	return 0
}

// SizeFlags encodes a geometry as request flag bits.
func SizeFlags(g Geometry) uint32 {
	f := alignBits(g.AlignSize, FlagAlign1M)
	switch g.SectorSize {
	case SectorSize512:
		f |= FlagSector512
	case SectorSize4K:
		f |= FlagSector4K
	}
	return f
}

// GeometryForWrite chooses the sizes an init or format writes, from the
// request flags and the device's logical sector size:
//   - both a sector and an align flag: the pair must be valid;
//   - neither: device sector size, its legacy align, and max_hosts 2000
//     whatever the pair (a historical default kept for compatibility);
//   - only one of them: invalid.
//
// Invalid choices return ErrEPERM (-1), as sanlock does.
func GeometryForWrite(flags uint32, deviceSector int) (Geometry, error) {
	align := AlignFromFlags(flags)
	sector := SectorFromFlags(flags)
	switch {
	case align == 0 && sector == 0:
		a := LegacyAlign(deviceSector)
		if a < 0 {
			return Geometry{}, rescode.ErrEPERM
		}
		return Geometry{SectorSize: deviceSector, AlignSize: a, MaxHosts: DefaultMaxHosts}, nil
	case align == 0 || sector == 0:
		return Geometry{}, rescode.ErrEPERM
	}
	g, ok := LookupGeometry(sector, align)
	if !ok {
		return Geometry{}, rescode.ErrEPERM
	}
	return g, nil
}

// GeometryFromLeader derives the sizes recorded in a leader: its sector_size
// and LFL_ALIGN_* flag, or the legacy align when no flag is set. max_hosts
// comes from the pair table; a leader with a legacy (flagless) layout gets
// DefaultMaxHosts. It fails with ErrLeaderSectorSize for a sector size other
// than 512/4096 and ErrAddLSSizes for an invalid pair.
func GeometryFromLeader(l *Leader) (Geometry, error) {
	sector := int(l.SectorSize)
	if sector != SectorSize512 && sector != SectorSize4K {
		return Geometry{}, rescode.ErrLeaderSectorSize
	}
	align := alignFromBits(l.Flags, LeaderAlign1M)
	if align == 0 {
		return Geometry{SectorSize: sector, AlignSize: LegacyAlign(sector), MaxHosts: DefaultMaxHosts}, nil
	}
	g, ok := LookupGeometry(sector, align)
	if !ok {
		return Geometry{}, rescode.ErrAddLSSizes
	}
	return g, nil
}

// roundUp rounds n up to a multiple of to (to for n <= 0).
func roundUp(n, to int) int {
	if n <= 0 {
		return to
	}
	return (n + to - 1) / to * to
}
