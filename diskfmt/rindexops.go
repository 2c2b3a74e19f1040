package diskfmt

import (
	"context"

	"github.com/gosanlock/gosanlock/rescode"
)

// FormatRindex writes an empty resource index at off (header plus zeroed
// entries, one align-size write) and then initialises its internal lease
// RindexLeaseName at off+align. maxResources 0 means DefaultMaxResources;
// values are capped at the geometry's maximum.
func FormatRindex(ctx context.Context, dev Device, off int64, flags uint32, space string, maxResources uint32) error {
	g, err := GeometryForWrite(flags, dev.SectorSize())
	if err != nil {
		return err
	}
	name, err := Name(space)
	if err != nil {
		return err
	}
	if maxResources == 0 {
		maxResources = DefaultMaxResources
	}
	if m := uint32(RindexMaxResources(g)); maxResources > m {
		maxResources = m
	}
	h := RindexHeader{
		Magic:         RindexMagic,
		Version:       RindexVersion,
		Flags:         RindexAlignFlag(g.AlignSize),
		SectorSize:    uint32(g.SectorSize),
		MaxResources:  maxResources,
		RxOffset:      uint64(off),
		LockspaceName: name,
	}
	area := make([]byte, g.AlignSize)
	h.Encode(area)
	if err := dev.WriteAt(ctx, area, off); err != nil {
		return err
	}
	lease, err := InitPaxosArea(PaxosInit{Geometry: g, SpaceName: space, ResourceName: RindexLeaseName})
	if err != nil {
		return err
	}
	return dev.WriteAt(ctx, lease, off+int64(g.AlignSize))
}

// Rindex is an opened resource index: its verified header and geometry.
type Rindex struct {
	Dev    Device
	Offset int64
	Header RindexHeader
	Geo    Geometry
}

// OpenRindex reads and verifies the header at off. sectorSize is the
// lockspace's sector size when known, else 0 (a 4096-byte read is used).
func OpenRindex(ctx context.Context, dev Device, off int64, space string, sectorSize int) (*Rindex, error) {
	if sectorSize == 0 {
		sectorSize = SectorSize4K
	}
	b, err := ReadSector(ctx, dev, off, sectorSize)
	if err != nil {
		return nil, err
	}
	h, err := VerifyRindexHeader(b, space, uint64(off))
	if err != nil {
		return nil, err
	}
	g, err := h.Geometry()
	if err != nil {
		return nil, err
	}
	return &Rindex{Dev: dev, Offset: off, Header: h, Geo: g}, nil
}

// maxEntries is how many entries the index searches.
func (r *Rindex) maxEntries() int {
	n := int(r.Header.MaxResources)
	if m := MaxRindexEntries(r.Geo); n > m || n == 0 {
		n = m
	}
	return n
}

// Entries reads every searched entry.
func (r *Rindex) Entries(ctx context.Context) ([]RindexEntry, error) {
	n := r.maxEntries()
	size := roundUp(int(RindexEntryOffset(r.Geo, n)), r.Geo.SectorSize)
	b := make([]byte, size)
	if err := r.Dev.ReadAt(ctx, b, r.Offset); err != nil {
		return nil, err
	}
	es := make([]RindexEntry, n)
	for i := range es {
		es[i], _ = DecodeRindexEntry(b[RindexEntryOffset(r.Geo, i):])
	}
	return es, nil
}

// EntryIndex maps a resource lease offset to its entry index. The offset
// must be a multiple of the align size inside the index's range.
func (r *Rindex) EntryIndex(resOffset uint64) (int, error) {
	i, err := r.entrySlot(resOffset)
	if err != nil {
		return 0, err
	}
	if i >= r.maxEntries() {
		return 0, rescode.ErrRindexOffset
	}
	return i, nil
}

// entrySlot maps a resource lease offset to the slot that records it in
// the index area, which may lie past max_resources (sanlock writes such
// slots on update). Offsets that are not align multiples, or that lie
// before the first resource or past the area, are ErrRindexOffset.
func (r *Rindex) entrySlot(resOffset uint64) (int, error) {
	a := uint64(r.Geo.AlignSize)
	base := uint64(r.Offset) + 2*a
	if resOffset%a != 0 || resOffset < base {
		return 0, rescode.ErrRindexOffset
	}
	i := (resOffset - base) / a
	if i >= uint64(MaxRindexEntries(r.Geo)) {
		return 0, rescode.ErrRindexOffset
	}
	return int(i), nil
}

// Lookup finds an entry. With neither name nor offset it returns the first
// free slot (name ""). With a name only, the entry of that name (ErrENOENT
// if none). With an offset (which must be an align multiple, else
// ErrRindexOffset) it returns the entry recorded for that offset, or an
// empty one when the slot is free or outside the index, with ResOffset set
// to the offset asked for; a name given as well must match the recorded
// one (ErrRindexDiff otherwise). This is what sanlock 3.8.5 answers.
func (r *Rindex) Lookup(ctx context.Context, name string, resOffset uint64) (RindexEntry, error) {
	es, err := r.Entries(ctx)
	if err != nil {
		return RindexEntry{}, err
	}
	switch {
	case name == "" && resOffset == 0:
		for i := range es {
			if es[i].IsFree() {
				return RindexEntry{ResOffset: RindexResourceOffset(r.Geo, r.Header.RxOffset, i)}, nil
			}
		}
		return RindexEntry{}, rescode.ErrENOSPC
	case resOffset != 0:
		if resOffset%uint64(r.Geo.AlignSize) != 0 {
			return RindexEntry{}, rescode.ErrRindexOffset
		}
		var e RindexEntry
		if i, err := r.EntryIndex(resOffset); err == nil {
			e = es[i]
		}
		if name != "" && !NameEqual(e.Name[:], name) {
			return e, rescode.ErrRindexDiff
		}
		e.ResOffset = resOffset
		return e, nil
	default:
		for i := range es {
			if !es[i].IsFree() && NameEqual(es[i].Name[:], name) {
				return es[i], nil
			}
		}
		return RindexEntry{}, rescode.ErrENOENT
	}
}

// UpdateEntry rewrites the one sector holding the entry for resOffset: with
// remove false it records name there, with remove true it frees the slot.
func (r *Rindex) UpdateEntry(ctx context.Context, name string, resOffset uint64, remove bool) error {
	if resOffset == 0 || (!remove && name == "") {
		return rescode.ErrEINVAL
	}
	i, err := r.entrySlot(resOffset)
	if err != nil {
		return err
	}
	var e RindexEntry
	if !remove {
		n, err := Name(name)
		if err != nil {
			return err
		}
		e = RindexEntry{ResOffset: resOffset, Name: n}
	}
	return r.writeEntry(ctx, i, e)
}

func (r *Rindex) writeEntry(ctx context.Context, i int, e RindexEntry) error {
	eo := RindexEntryOffset(r.Geo, i)
	ss := int64(r.Geo.SectorSize)
	secOff := r.Offset + eo/ss*ss
	b, err := ReadSector(ctx, r.Dev, secOff, r.Geo.SectorSize)
	if err != nil {
		return err
	}
	e.Encode(b[eo%ss:])
	return r.Dev.WriteAt(ctx, b, secOff)
}

// Rebuild recreates every entry from the leases found on disk: entry i is
// set when the lease at its offset has paxos magic (cleared leases do not
// count). The scan stops at the end of the device. The whole index area,
// header sector included, is then written in one write.
func (r *Rindex) Rebuild(ctx context.Context) error {
	area := make([]byte, r.Geo.AlignSize)
	if err := r.Dev.ReadAt(ctx, area[:r.Geo.SectorSize], r.Offset); err != nil {
		return err
	}
	for i := 0; i < r.maxEntries(); i++ {
		off := RindexResourceOffset(r.Geo, r.Header.RxOffset, i)
		b, err := ReadSector(ctx, r.Dev, int64(off), r.Geo.SectorSize)
		if IsShortRead(err) {
			break
		}
		if err != nil {
			return err
		}
		l, _ := DecodeLeader(b)
		if l.Magic != PaxosMagic {
			continue
		}
		e := RindexEntry{ResOffset: off, Name: l.ResourceName}
		e.Encode(area[RindexEntryOffset(r.Geo, i):])
	}
	return r.Dev.WriteAt(ctx, area, r.Offset)
}
