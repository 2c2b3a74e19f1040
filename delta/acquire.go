package delta

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

// AcquirePlan is what acquire decides after its first read (docs/delta.md
// "Acquiring a host_id" steps 2–5).
type AcquirePlan struct {
	// OtherIOTimeout is the io_timeout of the lease as read (own io_timeout
	// if the lease has 0). It sets both delays.
	OtherIOTimeout int
	// Free: the lease was released or never acquired (timestamp 0).
	Free bool
	// FastReacquire: the lease names our host name; it is our own lease
	// left behind by a crash or an aborted add.
	FastReacquire bool
	// Wait is how long to watch the lease before reading it again, seconds;
	// 0 when Free or FastReacquire.
	Wait int
	// ShortDelay is the wait between our write and the read-back, seconds.
	ShortDelay int
}

// PlanAcquire decides, from the lease as first read, whether the lease must
// be watched for a live owner and for how long. Nothing about the owner's
// clock is used: its liveness is judged later by whether the lease changed.
func PlanAcquire(rec *diskfmt.Leader, hostName string, t Timing) AcquirePlan {
	other := OtherIOTimeout(rec.IOTimeout, t.IOTimeout)
	p := AcquirePlan{OtherIOTimeout: other, ShortDelay: DeltaShortDelay(other)}
	switch {
	case rec.Timestamp == 0:
		p.Free = true
	case diskfmt.NameEqual(rec.ResourceName[:], hostName):
		p.FastReacquire = true
	default:
		p.Wait = AcquireHeldDelay(other, t.WatchdogFireTimeout)
	}
	return p
}

// CheckHeldLease is the liveness decision after the long wait (docs/delta.md "Acquiring a host_id"
// step 7): the owner is alive, and the host_id busy, unless the lease is
// byte-for-byte what we saw before the wait (all 200 record bytes) or it
// was released meanwhile.
func CheckHeldLease(before, after []byte) error {
	if sameRecord(before, after) {
		return nil
	}
	if rec, err := diskfmt.DecodeLeader(after); err == nil && rec.Timestamp == 0 {
		return nil
	}
	return rescode.ErrHostIDBusy
}

// NewAcquireRecord builds the record acquire writes (docs/delta.md "Acquiring a host_id" step 8)
// from the lease as last read: our host_id, the next generation, our host name,
// timestamp now and our io_timeout (low 8 bits); every other field as read.
//
// The host name is stored as C's snprintf would: at most 47 bytes and a NUL,
// with the bytes after that NUL left as the previous owner wrote them.
func NewAcquireRecord(prev diskfmt.Leader, hostID uint64, hostName string, ownIO int, now uint64) diskfmt.Leader {
	rec := prev
	rec.Timestamp = now
	rec.IOTimeout = DiskIOTimeout(ownIO)
	rec.OwnerID = hostID
	rec.OwnerGeneration = prev.OwnerGeneration + 1
	rec.Flags &^= diskfmt.LeaderDeadExt // a new incarnation (5.1.1 keeps unused1)
	n := len(hostName)
	if i := indexByte(hostName, 0); i >= 0 {
		n = i
	}
	n = min(n, diskfmt.NameLen-1)
	copy(rec.ResourceName[:n], hostName)
	rec.ResourceName[n] = 0
	rec.Checksum = rec.ComputeChecksum()
	return rec
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// CheckAcquired is the decision after the short delay (docs/delta.md "Acquiring a host_id" step
// 10): the acquire holds only if the lease still carries exactly what we wrote;
// otherwise another host wrote after us and the host_id is busy.
func CheckAcquired(written, read []byte) error {
	if sameRecord(written, read) {
		return nil
	}
	return rescode.ErrHostIDBusy
}

// Acquired is the outcome of a successful acquire.
type Acquired struct {
	// Leader is the record we wrote and read back.
	Leader diskfmt.Leader
	// LastSuccess is the timestamp we wrote, taken before the short delay
	// (docs/delta.md "Acquiring a host_id" step 10, "Completing the add").
	LastSuccess uint64
	// Plan is what the first read led to.
	Plan AcquirePlan
}

// Acquire takes the delta lease for l.HostID with host name hostName
// (docs/delta.md "Acquiring a host_id"). The sequence is:
//
//  1. read the lease; if it is free or ours, go to 3;
//  2. otherwise watch it for max(8N+W, 8N) seconds (N = the lease's
//     io_timeout), read it again, and fail with rescode.ErrHostIDBusy if it
//     changed and was not released (a live owner renewed it);
//  3. write our record (next generation, our name, our timestamp);
//  4. wait 2N (N = the lease's io_timeout before our write), read it back and
//     fail with rescode.ErrHostIDBusy if another host overwrote it.
//
// Cancelling ctx during a wait aborts with rescode.ErrGeneric (-201); a
// record written before the abort stays on disk. Read and verify errors
// (diskfmt.ErrLeader*, I/O errors, timeouts) are returned as they come;
// rescode.CodeOf maps them to result values.
func (l *Lease) Acquire(ctx context.Context, hostName string) (Acquired, error) {
	if err := l.validate(); err != nil {
		return Acquired{}, err
	}
	rec, raw, err := l.readOwn(ctx)
	if err != nil {
		return Acquired{}, err
	}
	if rec.CAW() {
		// sanlock 5.x writes a delta lease marked CAW with SCSI COMPARE
		// AND WRITE; our write-wait-read acquire would not exclude such a
		// writer. Refused as 5.x refuses it where CAW cannot be used.
		return Acquired{}, fmt.Errorf("delta lease %s:%d flags %#x: marked for SCSI COMPARE AND WRITE, which this daemon does not do: %w", l.Space, l.HostID, rec.Flags, rescode.ErrCAWOpen)
	}
	if rec.DeadExt() {
		// Another host declared this host_id's last incarnation dead (5.x
		// DEAD_EXT). Joining writes a new generation without the mark, as
		// 5.1.1 does (it keeps unused1): peers see a new incarnation.
		l.log().Info("delta_acquire over DEAD_EXT", zap.String("space", l.Space), zap.Uint64("host_id", l.HostID),
			zap.Uint64("generation", rec.OwnerGeneration))
	}
	l.log().Info("delta_acquire begin", zap.String("space", l.Space), zap.Uint64("host_id", l.HostID))
	plan := PlanAcquire(&rec, hostName, l.Timing)
	if l.NoDelay {
		l.log().Info("delta_acquire nodelay", zap.Int("skipped_delay", plan.Wait), zap.Int("skipped_short_delay", plan.ShortDelay))
		plan.Wait, plan.ShortDelay = 0, 0
	}
	if rec.IOTimeout == 0 {
		l.log().Info("delta_acquire use own io_timeout", zap.Int("io_timeout", l.Timing.IOTimeout))
	}
	if plan.OtherIOTimeout != l.Timing.IOTimeout {
		l.log().Info("delta_acquire other io_timeout", zap.Int("other_io_timeout", plan.OtherIOTimeout), zap.Int("io_timeout", l.Timing.IOTimeout))
	}

	if plan.FastReacquire {
		l.log().Info("delta_acquire fast reacquire")
	}
	if plan.Wait > 0 {
		l.log().Info("delta_acquire delta_large_delay", zap.Int("delta_large_delay", DeltaLargeDelay(plan.OtherIOTimeout)),
			zap.Int("delay", plan.Wait))
		if err := sleepFor(ctx, l.Clock, seconds(plan.Wait)); err != nil {
			l.log().Info("delta_acquire abort1 remove", zap.String("space", l.Space), zap.Uint64("host_id", l.HostID))
			return Acquired{}, rescode.ErrGeneric
		}
		rec2, raw2, err := l.readOwn(ctx)
		if err != nil {
			return Acquired{}, err
		}
		if err := CheckHeldLease(raw, raw2); err != nil {
			l.log().Info("delta_acquire host_id busy1", ownerFields(l.HostID, &rec2)...)
			return Acquired{}, err
		}
		rec = rec2
	}

	now := clock.Monotime(l.Clock)
	mine := NewAcquireRecord(rec, l.HostID, hostName, l.Timing.IOTimeout, now)
	sector := buildSector(&mine, l.Geometry.SectorSize, nil)
	written := recordBytes(&mine)
	l.log().Info("delta_acquire write", ownerFields(0, &mine)...)
	if _, err := l.write(ctx, sector, l.sectorOffset(), l.Timing.IOTimeoutDuration()); err != nil {
		return Acquired{}, err
	}

	l.log().Info("delta_acquire delta_short_delay", zap.Int("delay", plan.ShortDelay))
	if err := sleepFor(ctx, l.Clock, seconds(plan.ShortDelay)); err != nil {
		l.log().Info("delta_acquire abort2 remove", zap.String("space", l.Space), zap.Uint64("host_id", l.HostID))
		return Acquired{}, rescode.ErrGeneric
	}
	rec3, raw3, err := l.readOwn(ctx)
	if err != nil {
		return Acquired{}, err
	}
	if err := CheckAcquired(written, raw3); err != nil {
		l.log().Info("delta_acquire host_id busy2", ownerFields(l.HostID, &rec3)...)
		return Acquired{}, err
	}
	l.log().Info("delta_acquire done", zap.Uint64("owner_id", rec3.OwnerID), zap.Uint64("owner_generation", rec3.OwnerGeneration),
		zap.Uint64("timestamp", rec3.Timestamp))
	return Acquired{Leader: rec3, LastSuccess: now, Plan: plan}, nil
}
