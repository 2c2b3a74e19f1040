package delta

import (
	"bytes"
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/diskio"
	"github.com/gosanlock/gosanlock/rescode"
)

// HostEvent is a sanlk_host_event: a small message for one host, carried in
// the sender's delta lease (write_id = Generation, write_generation =
// Event, write_timestamp = Data) while the target's bitmap bit is set.
type HostEvent struct {
	HostID     uint64 // target host_id (not stored on disk)
	Generation uint64
	Event      uint64
	Data       uint64
}

// RenewInput is what one renewal needs besides the disk.
type RenewInput struct {
	// Last is our last good record: the one acquire read back, or the one
	// the previous successful renewal wrote.
	Last diskfmt.Leader
	// PrevOK: the previous acquire/renewal attempt succeeded, so the lease
	// must still be exactly Last (the RENEW_DIFF check). After a failed
	// attempt the check is skipped: that write may or may not have landed.
	PrevOK bool
	// Bitmap is the host bitmap to write (BitmapSize bytes or nil).
	Bitmap []byte
	// Event supplies the extras written with the lease (zero: none).
	Event HostEvent
	// RecordIO, when not 0, is the io_timeout written into the record
	// instead of the own one (a raised io_timeout is written before the
	// own timing follows it: Lockspace.SetIOTimeout).
	RecordIO int
}

// RenewOutput reports one renewal attempt. Fields are filled as far as the
// attempt got.
type RenewOutput struct {
	// Area is the whole lockspace as read (align_size bytes), nil if the
	// read failed. It is AreaBuf's bytes and belongs to the caller, who
	// may give AreaBuf back to the pool once nothing uses Area any more.
	Area    []byte
	AreaBuf *diskio.Buf
	// Leader is the record written (valid on success).
	Leader diskfmt.Leader
	// Timestamp is the new timestamp (valid on success).
	Timestamp uint64
	// ReadMs and WriteMs are the I/O durations in milliseconds; -1 when the
	// I/O was not done.
	ReadMs, WriteMs int64
}

// CheckRenewRecord verifies our record as found by a renewal read (spec:
// docs/delta.md "One renewal" steps 2–4) against our last good record: a damaged record
// gives the verify code, another owner/generation/host name
// rescode.ErrRenewOwner, a DEAD_EXT mark we did not write rescode.ErrDeadExt,
// and (only when prevOK) any other difference in the 200 record bytes
// rescode.ErrRenewDiff.
func CheckRenewRecord(raw []byte, space string, last *diskfmt.Leader, prevOK bool) (diskfmt.Leader, error) {
	rec, err := diskfmt.VerifyDelta(raw, space)
	if err != nil {
		return rec, err
	}
	if rec.DeadExt() && !last.DeadExt() {
		// Another host declared us dead (5.x DEAD_EXT): whatever the
		// previous attempt did, we must stop (IsCorrupt). Checked first:
		// 5.1.1 answers -263 also when the mark came with another
		// generation.
		return rec, rescode.ErrDeadExt
	}
	if rec.OwnerID != last.OwnerID || rec.OwnerGeneration != last.OwnerGeneration ||
		rec.ResourceName != last.ResourceName {
		return rec, rescode.ErrRenewOwner
	}
	var want [diskfmt.LeaderSize]byte
	last.Encode(want[:])
	if prevOK && !bytes.Equal(raw[:diskfmt.LeaderSize], want[:]) {
		return rec, rescode.ErrRenewDiff
	}
	return rec, nil
}

// NewRenewRecord builds the record a renewal writes (docs/delta.md "One renewal" steps 5–7): the
// record as read with our io_timeout (low 8 bits), timestamp now and the
// host event as extras.
func NewRenewRecord(cur diskfmt.Leader, ownIO int, now uint64, ev HostEvent) diskfmt.Leader {
	rec := cur
	if int(rec.IOTimeout) != ownIO {
		rec.IOTimeout = DiskIOTimeout(ownIO)
	}
	rec.Timestamp = now
	rec.WriteID = ev.Generation
	rec.WriteGeneration = ev.Event
	rec.WriteTimestamp = ev.Data
	rec.Checksum = rec.ComputeChecksum()
	return rec
}

// Renew performs one renewal (docs/delta.md "One renewal"): read the whole
// lockspace area with the own io_timeout, check our record, write our
// sector (record, zeros, bitmap) with host_dead_seconds as timeout. There is
// no read-back: the next renewal's read is the check.
//
// Out.Area is set whenever the read succeeded, even if a later step failed,
// so the caller can still look at the other hosts. A read that timed out is
// abandoned (rescode.ErrAIOTimeout via rescode.CodeOf); the next renewal
// issues a fresh one.
func (l *Lease) Renew(ctx context.Context, in RenewInput) (RenewOutput, error) {
	out := RenewOutput{ReadMs: -1, WriteMs: -1}
	if err := l.validate(); err != nil {
		return out, err
	}
	off := diskfmt.DeltaSectorOffset(l.HostID, l.Geometry.SectorSize)
	if off+int64(l.Geometry.SectorSize) > int64(l.Geometry.AlignSize) {
		return out, rescode.ErrEINVAL
	}
	ab, took, err := l.read(ctx, l.Geometry.AlignSize, l.Offset, l.Timing.IOTimeoutDuration())
	if err != nil {
		return out, fmt.Errorf("delta_renew read %s:%d: %w", l.Space, l.HostID, err)
	}
	area := ab.Bytes()
	out.Area, out.AreaBuf, out.ReadMs = area, ab, ms(took)
	raw := area[off : off+int64(l.Geometry.SectorSize)]
	cur, err := CheckRenewRecord(raw, l.Space, &in.Last, in.PrevOK)
	if err != nil {
		if rescode.CodeOf(err) == rescode.ErrRenewOwner {
			l.log().Info("delta_renew not owner")
		}
		return out, err
	}
	if int(cur.IOTimeout) != l.Timing.IOTimeout {
		l.log().Info("delta_renew io_timeout changed", zap.Uint16("disk_io_timeout", cur.IOTimeout), zap.Int("io_timeout", l.Timing.IOTimeout))
	}
	now := clock.Monotime(l.Clock)
	if cur.Timestamp >= now {
		l.log().Info("delta_renew timestamp too small", zap.Uint64("timestamp", cur.Timestamp), zap.Uint64("now", now))
	}
	recIO := l.Timing.IOTimeout
	if in.RecordIO != 0 {
		recIO = in.RecordIO
	}
	rec := NewRenewRecord(cur, recIO, now, in.Event)
	sector := buildSector(&rec, l.Geometry.SectorSize, in.Bitmap)
	wtook, err := l.write(ctx, sector, l.sectorOffset(), l.Timing.RenewWriteTimeout())
	out.WriteMs = ms(wtook)
	if err != nil {
		l.log().Info("delta_renew write error", zap.Int64("write_time", int64(wtook.Seconds())), resultField(err),
			zap.Int64("offset", l.sectorOffset()), causeField(err, l.Timing.IOTimeout))
		return out, fmt.Errorf("delta_renew write %s:%d: %w", l.Space, l.HostID, err)
	}
	if wtook >= seconds(l.Timing.IOTimeout) {
		l.log().Info("delta_renew long write time", zap.Int64("seconds", int64(wtook.Seconds())))
	}
	out.Leader, out.Timestamp = rec, now
	return out, nil
}

// NewReleaseRecord is the record release writes (docs/delta.md "Removing a lockspace"): the
// last good record with timestamp 0; owner, generation, host name,
// io_timeout and extras unchanged.
func NewReleaseRecord(last diskfmt.Leader) diskfmt.Leader {
	rec := last
	rec.Timestamp = 0
	rec.Checksum = rec.ComputeChecksum()
	return rec
}

// Release frees our delta lease: one sector write (record with timestamp
// 0, bitmap cleared) with the own io_timeout. It does not check ownership;
// callers release only when their last acquire/renewal attempt succeeded.
func (l *Lease) Release(ctx context.Context, last diskfmt.Leader) error {
	if err := l.validate(); err != nil {
		return err
	}
	l.log().Info("delta_release begin", zap.String("space", l.Space), zap.Uint64("host_id", l.HostID))
	rec := NewReleaseRecord(last)
	sector := buildSector(&rec, l.Geometry.SectorSize, nil)
	if _, err := l.write(ctx, sector, l.sectorOffset(), l.Timing.IOTimeoutDuration()); err != nil {
		return fmt.Errorf("delta_release %s:%d: %w", l.Space, l.HostID, err)
	}
	l.log().Info("delta_release done", zap.Uint64("owner_id", rec.OwnerID), zap.Uint64("owner_generation", rec.OwnerGeneration),
		zap.Uint64("timestamp", rec.Timestamp))
	return nil
}

// ReleaseIfOwned is the late release (LateReleaseDeadline): it reads our
// sector and writes the release only if the record there is still ours
// (owner, generation and host name of last; the timestamp may be newer if
// a failed renewal's write landed). A record that is damaged or no longer
// ours is never written: the error tells which.
func (l *Lease) ReleaseIfOwned(ctx context.Context, last diskfmt.Leader) error {
	if err := l.validate(); err != nil {
		return err
	}
	raw, _, err := l.read(ctx, l.Geometry.SectorSize, l.sectorOffset(), l.Timing.IOTimeoutDuration())
	if err != nil {
		return fmt.Errorf("delta_release read %s:%d: %w", l.Space, l.HostID, err)
	}
	_, err = CheckRenewRecord(raw.Bytes(), l.Space, &last, false)
	raw.Release()
	if err != nil {
		return fmt.Errorf("delta_release %s:%d: lease not ours: %w", l.Space, l.HostID, err)
	}
	return l.Release(ctx, last)
}
