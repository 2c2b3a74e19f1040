package diskfmt

import (
	"encoding/binary"

	"github.com/gosanlock/gosanlock/rescode"
)

// Resource index layout: sector 0 of the rindex area holds the header, the
// following sectors hold 64-byte entries; entry i describes the resource
// lease at rx_offset + (2+i)*align. The rindex's own paxos lease, named
// RindexLeaseName, sits at rx_offset + align.
const (
	RindexHeaderSize = 80
	RindexEntrySize  = 64

	RindexAlign1M uint32 = 0x1
	RindexAlign2M uint32 = 0x2
	RindexAlign4M uint32 = 0x4
	RindexAlign8M uint32 = 0x8

	// DefaultMaxResources is max_resources when the request says 0.
	DefaultMaxResources = 4096

	RindexLeaseName = "rindex_lease"
)

// RindexAlignFlag returns the RHF_ALIGN_* bit for an align size.
func RindexAlignFlag(align int) uint32 { return alignBits(align, RindexAlign1M) }

// RindexAlignFromFlags decodes RHF_ALIGN_* bits (first match 1M..8M).
func RindexAlignFromFlags(f uint32) int { return alignFromBits(f, RindexAlign1M) }

// MaxRindexEntries is the most entries an rindex area of geometry g holds.
func MaxRindexEntries(g Geometry) int {
	return (g.SectorsPerArea() - 1) * (g.SectorSize / RindexEntrySize)
}

// RindexMaxResources is the largest max_resources sanlock allows for g
// (16000, 16000, 32000, 64000, 128000 for the five pairs).
func RindexMaxResources(g Geometry) int {
	return g.MaxHosts * (g.SectorSize / RindexEntrySize)
}

// RindexHeader is the header in sector 0 of a resource index.
type RindexHeader struct {
	Magic         uint32
	Version       uint32
	Flags         uint32
	SectorSize    uint32
	MaxResources  uint32
	Unused        uint32
	RxOffset      uint64
	LockspaceName [NameLen]byte
}

// Encode writes the 80 bytes of the header.
func (h *RindexHeader) Encode(b []byte) {
	_ = b[RindexHeaderSize-1]
	le := binary.LittleEndian
	le.PutUint32(b[0:], h.Magic)
	le.PutUint32(b[4:], h.Version)
	le.PutUint32(b[8:], h.Flags)
	le.PutUint32(b[12:], h.SectorSize)
	le.PutUint32(b[16:], h.MaxResources)
	le.PutUint32(b[20:], h.Unused)
	le.PutUint64(b[24:], h.RxOffset)
	copy(b[32:80], h.LockspaceName[:])
}

// DecodeRindexHeader parses a header without validating it.
func DecodeRindexHeader(b []byte) (RindexHeader, error) {
	var h RindexHeader
	if len(b) < RindexHeaderSize {
		return h, rescode.ErrEIO
	}
	le := binary.LittleEndian
	h.Magic = le.Uint32(b[0:])
	h.Version = le.Uint32(b[4:])
	h.Flags = le.Uint32(b[8:])
	h.SectorSize = le.Uint32(b[12:])
	h.MaxResources = le.Uint32(b[16:])
	h.Unused = le.Uint32(b[20:])
	h.RxOffset = le.Uint64(b[24:])
	copy(h.LockspaceName[:], b[32:80])
	return h, nil
}

// VerifyRindexHeader checks magic, major version, lockspace name (full
// comparison) and rx_offset, in that order.
func VerifyRindexHeader(b []byte, space string, rxOffset uint64) (RindexHeader, error) {
	h, err := DecodeRindexHeader(b)
	if err != nil {
		return h, err
	}
	switch {
	case h.Magic != RindexMagic:
		return h, rescode.ErrRindexMagic
	case h.Version&VersionMajorMask != RindexVersion&VersionMajorMask:
		return h, rescode.ErrRindexVersion
	case NameString(h.LockspaceName[:]) != space:
		return h, rescode.ErrRindexLockspace
	case h.RxOffset != rxOffset:
		return h, rescode.ErrRindexOffset
	}
	return h, nil
}

// Geometry returns the sizes the header records.
func (h *RindexHeader) Geometry() (Geometry, error) {
	g, ok := LookupGeometry(int(h.SectorSize), RindexAlignFromFlags(h.Flags))
	if !ok {
		return Geometry{}, rescode.ErrEINVAL
	}
	return g, nil
}

// RindexEntry is one slot of a resource index.
type RindexEntry struct {
	ResOffset uint64
	Flags     uint32
	Unused    uint32
	Name      [NameLen]byte
}

// IsFree reports an unused slot.
func (e *RindexEntry) IsFree() bool { return e.ResOffset == 0 && e.Name[0] == 0 }

// Encode writes the 64 bytes of the entry.
func (e *RindexEntry) Encode(b []byte) {
	_ = b[RindexEntrySize-1]
	le := binary.LittleEndian
	le.PutUint64(b[0:], e.ResOffset)
	le.PutUint32(b[8:], e.Flags)
	le.PutUint32(b[12:], e.Unused)
	copy(b[16:64], e.Name[:])
}

// DecodeRindexEntry parses one 64-byte entry.
func DecodeRindexEntry(b []byte) (RindexEntry, error) {
	var e RindexEntry
	if len(b) < RindexEntrySize {
		return e, rescode.ErrEIO
	}
	le := binary.LittleEndian
	e.ResOffset = le.Uint64(b[0:])
	e.Flags = le.Uint32(b[8:])
	e.Unused = le.Uint32(b[12:])
	copy(e.Name[:], b[16:64])
	return e, nil
}

// RindexEntryOffset is the byte offset of entry i from the rindex start.
func RindexEntryOffset(g Geometry, i int) int64 {
	return int64(g.SectorSize) + int64(i)*RindexEntrySize
}

// RindexResourceOffset is the device offset of the lease that entry i
// describes.
func RindexResourceOffset(g Geometry, rxOffset uint64, i int) uint64 {
	return rxOffset + uint64(2+i)*uint64(g.AlignSize)
}
