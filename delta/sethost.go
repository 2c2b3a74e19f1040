package delta

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

// DeadExtRecord is the record set_host DEAD_EXT writes over host_id's
// delta lease rec (docs/delta.md "set_host DEAD_EXT"): the same record
// with the DEAD_EXT leader flag and mark (diskfmt.DeadExtFrom: the
// writer's host_id and generation) in unused1, resealed. gen names the incarnation the caller fenced: 0 takes the
// record's own generation, anything else must equal it, else
// rescode.ErrWrongGeneration and nothing is to be written. (5.1.1 writes
// whatever generation it is given; a record whose generation moved on
// looks like a new incarnation to its peers and frees the host's leases at
// once, so we refuse instead.)
func DeadExtRecord(rec diskfmt.Leader, hostID, gen, mark uint64) (diskfmt.Leader, error) {
	if gen != 0 && gen != rec.OwnerGeneration {
		return rec, fmt.Errorf("delta lease host_id %d generation %d, asked %d: %w",
			hostID, rec.OwnerGeneration, gen, rescode.ErrWrongGeneration)
	}
	out := rec
	out.Flags |= diskfmt.LeaderDeadExt
	out.Unused1 = mark
	out.Checksum = out.ComputeChecksum()
	return out, nil
}

// SetHostDeadExt marks host_id hostID's delta lease DEAD_EXT (set_host
// DEAD_EXT): it reads that host's sector, checks it (DeadExtRecord) and
// writes it back with the mark, the rest of the sector (the host's
// bitmap) unchanged. Marking our own host_id is allowed, as 5.1.1 allows
// it: our next renewal then fails with -263. The caller must have fenced
// the host first: on a NO_TIMEOUT lockspace the mark is what lets other
// hosts take over its leases.
func (ls *Lockspace) SetHostDeadExt(ctx context.Context, hostID, gen uint64) (diskfmt.Leader, error) {
	ls.mu.Lock()
	g := ls.lease.Geometry
	joined := ls.hosts != nil
	mark := diskfmt.DeadExtFrom(ls.cfg.HostID, ls.status.HostGeneration)
	ls.mu.Unlock()
	if !joined || g.SectorSize == 0 {
		return diskfmt.Leader{}, errNotJoined
	}
	if hostID == 0 || hostID > MaxHostID || hostID > uint64(g.SectorsPerArea()) {
		return diskfmt.Leader{}, rescode.ErrEINVAL
	}
	off := ls.cfg.Offset + diskfmt.DeltaSectorOffset(hostID, g.SectorSize)
	ioctx, cancel := ioContext(ctx, ls.timing.IOTimeoutDuration())
	defer cancel()
	b, err := diskfmt.ReadSector(ioctx, ls.cfg.Dev, off, g.SectorSize)
	if err != nil {
		return diskfmt.Leader{}, err
	}
	rec, err := diskfmt.VerifyDelta(b, ls.cfg.Space)
	if err != nil {
		return rec, err
	}
	out, err := DeadExtRecord(rec, hostID, gen, mark)
	if err != nil {
		return rec, err
	}
	sector := append([]byte(nil), b...)
	out.Seal(sector)
	if err := ls.cfg.Dev.WriteAt(ioctx, sector, off); err != nil {
		return rec, err
	}
	ls.mu.Lock()
	if ls.hosts != nil {
		ls.hosts.stored(int(hostID - 1)).WroteDeadExtGen = out.OwnerGeneration
	}
	ls.mu.Unlock()
	ls.log().Warn("set_host DEAD_EXT", zap.String("space", ls.cfg.Space), zap.Uint64("host-id", hostID),
		zap.Uint64("generation", out.OwnerGeneration), zap.Uint64("timestamp", out.Timestamp))
	return out, nil
}
