package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/gosanlock/gosanlock/diskfmt"
)

// dumpProbes is how many 1 MiB steps dump searches for a leader that
// tells it the sizes.
const dumpProbes = 1024

// detectGeometry finds the sizes of the leases at or after start: the
// first delta or paxos leader found at start + k MiB (k < 1024, and inside
// size when size is given) decides. usable is false when that leader
// records sizes that are not a valid pair (e.g. sector_size 1024).
func detectGeometry(ctx context.Context, dev diskfmt.Device, start, size uint64) (g diskfmt.Geometry, found, usable bool) {
	for k := uint64(0); k < dumpProbes; k++ {
		if size != 0 && k*diskfmt.MiB >= size {
			break
		}
		l, err := diskfmt.ProbeLeader(ctx, dev, int64(start+k*diskfmt.MiB))
		if err != nil || (l.Magic != diskfmt.DeltaMagic && l.Magic != diskfmt.PaxosMagic) {
			continue
		}
		g, err := diskfmt.GeometryFromLeader(&l)
		return g, true, err == nil
	}
	return diskfmt.Geometry{}, false, false
}

// dump prints the leases found from the given offset on.
func (d *direct) dump(path string, force uint32) int {
	a := parseDumpPath(path)
	if a.Offset%diskfmt.MiB != 0 {
		fmt.Fprintln(d.out, "WARNING: dump offset should be a multiple of 1048576 bytes.")
	}
	dev, err := d.open(a.Path)
	if err != nil {
		fmt.Fprintf(d.out, "Device %s not found.\n", a.Path)
		return 1
	}
	defer dev.Close()
	ctx, cancel := d.ioContext()
	defer cancel()

	g, ok := diskfmt.GeometryFromFlags(d.sizeFlags)
	usable := true
	if !ok {
		var found bool
		g, found, usable = detectGeometry(ctx, dev, a.Offset, a.Size)
		if !found {
			fmt.Fprintln(d.out, "Cannot find sector_size and align_size, set with -A and -Z.")
			return 1
		}
	}

	lverTitle := "lver"
	if force != 0 {
		lverTitle = "lver/req/mode"
	}
	fmt.Fprintf(d.out, "%8s %36s %48s %10s %4s %4s %s\n",
		"offset", "lockspace", "resource", "timestamp", "own", "gen", lverTitle)

	if !usable {
		// The leader found names sizes no I/O can use; sanlock's reads
		// then all fail and it prints no lease.
		return 0
	}
	ss := uint64(g.SectorSize)
	end := uint64(0) // 0: walk until a chunk holds no lease
	if n := a.Size / ss; n != 0 {
		end = a.Offset/ss*ss + n*ss
	}
	chunk := make([]byte, g.AlignSize)
	for off := a.Offset; end == 0 || off < end; off += uint64(g.AlignSize) {
		if err := dev.ReadAt(ctx, chunk, int64(off)); err != nil {
			// sanlock prints nothing for a chunk it cannot read whole
			// (including one cut short by the end of the device).
			clear(chunk)
		}
		l, _ := diskfmt.DecodeLeader(chunk)
		h, _ := diskfmt.DecodeRindexHeader(chunk)
		switch {
		case l.Magic == diskfmt.DeltaMagic:
			d.dumpDelta(chunk, off, g, force)
		case l.Magic == diskfmt.PaxosMagic:
			d.dumpPaxos(chunk, off, g, &l, force)
		case h.Magic == diskfmt.RindexMagic:
			d.dumpRindex(chunk, off, g, &h, force)
		default:
			if end == 0 {
				return 0
			}
		}
	}
	return 0
}

func (d *direct) dumpDelta(chunk []byte, off uint64, g diskfmt.Geometry, force uint32) {
	for i := 0; i < g.SectorsPerArea(); i++ {
		sec := chunk[i*g.SectorSize : (i+1)*g.SectorSize]
		l, _ := diskfmt.DecodeLeader(sec)
		if l.Magic == 0 || (l.OwnerID == 0 && l.OwnerGeneration == 0) {
			continue
		}
		fmt.Fprintf(d.out, "%08d %36s %48s %010d %04d %04d",
			off+uint64(i*g.SectorSize), diskfmt.NameString(l.SpaceName[:]),
			diskfmt.NameString(l.ResourceName[:]), l.Timestamp, l.OwnerID, l.OwnerGeneration)
		if l.NewFormat() {
			// sanlock 5.x prints every delta lease's flags here; 3.8.5
			// nothing. Leases 3.8.5 can read are printed as it does.
			fmt.Fprintf(d.out, " 0x%08x", l.Flags)
		}
		if force != 0 {
			for _, h := range diskfmt.BitmapHosts(sec, g.MaxHosts) {
				fmt.Fprintf(d.out, " %d", h)
			}
		}
		fmt.Fprintln(d.out)
	}
}

func (d *direct) dumpPaxos(chunk []byte, off uint64, g diskfmt.Geometry, l *diskfmt.Leader, force uint32) {
	fmt.Fprintf(d.out, "%08d %36s %48s %010d %04d %04d %d",
		off, diskfmt.NameString(l.SpaceName[:]), diskfmt.NameString(l.ResourceName[:]),
		l.Timestamp, l.OwnerID, l.OwnerGeneration, l.Lver)
	if force != 0 {
		req, _ := diskfmt.DecodeRequest(chunk[g.SectorSize:])
		fmt.Fprintf(d.out, "/%d/%d", req.Lver, req.ForceMode)
	}
	fmt.Fprintln(d.out)
	n := l.NumHosts
	if limit := uint64(g.SectorsPerArea() - 2); n > limit {
		n = limit
	}
	for i := uint64(0); i < n; i++ {
		sec := chunk[(2+i)*uint64(g.SectorSize):]
		if force >= 2 {
			db, _ := diskfmt.DecodeDblock(sec)
			if db.Mbal != 0 || db.Inp != 0 || db.Lver != 0 {
				fmt.Fprintf(d.out, "dblock[%04d] mbal %d bal %d inp %d inp2 %d inp3 %d lver %d sum %x\n",
					i, db.Mbal, db.Bal, db.Inp, db.Inp2, db.Inp3, db.Lver, db.Checksum)
			}
		}
		mb, _ := diskfmt.DecodeModeBlock(sec[diskfmt.ModeBlockOffset:])
		if mb.Flags&diskfmt.ModeShared != 0 {
			fmt.Fprintf(d.out, "%s%04d %04d SH\n", strings.Repeat(" ", 106), i+1, mb.Generation)
		}
	}
}

func (d *direct) dumpRindex(chunk []byte, off uint64, g diskfmt.Geometry, h *diskfmt.RindexHeader, force uint32) {
	space := diskfmt.NameString(h.LockspaceName[:])
	fmt.Fprintf(d.out, "%08d %36s rindex_header 0x%x %d %d %d\n",
		off, space, h.Flags, h.SectorSize, h.MaxResources, h.RxOffset)
	if force == 0 {
		return
	}
	for eo := g.SectorSize; eo+diskfmt.RindexEntrySize <= len(chunk); eo += diskfmt.RindexEntrySize {
		e, _ := diskfmt.DecodeRindexEntry(chunk[eo:])
		if e.IsFree() {
			continue
		}
		fmt.Fprintf(d.out, "%08d %36s rentry %s %d\n",
			off+uint64(eo), space, diskfmt.NameString(e.Name[:]), e.ResOffset)
	}
}

// nextFree prints the offset (relative to the start) of the first
// align-size area whose first sector holds no lease or rindex. Without
// -Z/-A the sizes are detected like dump does, falling back to the
// device's defaults (sanlock 3.8.5 used uninitialised sizes there).
func (d *direct) nextFree(path string) int {
	a := parseNextFreePath(path)
	dev, err := d.open(a.Path)
	if err != nil {
		return rvOf(err)
	}
	defer dev.Close()
	ctx, cancel := d.ioContext()
	defer cancel()
	g, ok := diskfmt.GeometryFromFlags(d.sizeFlags)
	if !ok {
		if g, _, ok = detectGeometry(ctx, dev, a.Offset, 0); !ok {
			g, err = diskfmt.GeometryForWrite(0, dev.SectorSize())
			if err != nil {
				return rvOf(err)
			}
		}
	}
	for k := uint64(0); ; k++ {
		rel := k * uint64(g.AlignSize)
		sec, err := diskfmt.ReadSector(ctx, dev, int64(a.Offset+rel), g.SectorSize)
		if err != nil {
			clear(sec)
		}
		l, _ := diskfmt.DecodeLeader(sec)
		switch l.Magic {
		case diskfmt.DeltaMagic, diskfmt.PaxosMagic, diskfmt.RindexMagic:
			continue
		}
		fmt.Fprintf(d.out, "%d\n", rel)
		return 0
	}
}
