package delta

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/diskio"
	"github.com/gosanlock/gosanlock/rescode"
)

// Lease is one host_id's delta lease in a lockspace, with what the
// operations need to reach it: the device, the clock and the own timing.
// Its methods are thin drivers (read, decide, write, sleep); the decisions
// are the pure functions in acquire.go, renew.go and release.go.
//
// Every read lands in a pooled aligned buffer (diskio.ReadBuf; a buffer
// whose read timed out is never pooled again) and every I/O gets its own
// context whose deadline is the spec's per-I/O timeout (docs/timing.md "Per-I/O timeouts"). I/O
// contexts are detached from the caller's cancellation: an I/O that has started runs until it
// completes or times out, as in sanlock, and cancellation is only looked at
// between steps (the acquire sleeps, the renewal loop).
type Lease struct {
	Dev      diskfmt.Device
	Offset   int64            // start of the lockspace area
	Geometry diskfmt.Geometry // sizes of the lockspace (from its sector 0)
	Space    string           // lockspace name
	HostID   uint64           // 1..Geometry.MaxHosts
	Timing   Timing           // own io_timeout and W
	Clock    clock.Clock
	// NoDelay (ADD_LOCKSPACE NODELAY) skips both acquire waits: the long
	// watch of a lease another host may be renewing and the short delay
	// before the read-back. The read-back itself is kept. This gives up
	// the detection of another host using the same host_id (docs/delta.md
	// "NODELAY").
	NoDelay bool
	// Log receives the operations' log lines (sanlock's wording where the
	// spec gives it, then fields); nil discards them.
	Log *zap.Logger
}

func (l *Lease) log() *zap.Logger { return nopOr(l.Log) }

// sectorOffset is the absolute byte offset of our delta lease.
func (l *Lease) sectorOffset() int64 {
	return l.Offset + diskfmt.DeltaSectorOffset(l.HostID, l.Geometry.SectorSize)
}

// ioContext is the context of one I/O: the caller's values without its
// cancellation, plus the I/O timeout as deadline.
func ioContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if ctx.Done() != nil {
		ctx = context.WithoutCancel(ctx)
	}
	return context.WithTimeout(ctx, timeout)
}

// read reads n bytes at off into a pooled buffer that the caller
// releases. After a failure there is no buffer: a device that timed out may
// still be filling it. A read answered only after its timeout fails as a
// timeout too: where submitting the request waits for the device (a
// kernel or file system without asynchronous direct I/O), nothing ends
// the wait at the timeout, and what a read brings back that late must not
// decide a write (a renewal, a release) that the timing no longer allows.
func (l *Lease) read(ctx context.Context, n int, off int64, timeout time.Duration) (*diskio.Buf, time.Duration, error) {
	ioctx, cancel := ioContext(ctx, timeout)
	defer cancel()
	start := l.Clock.Now()
	b, err := diskio.ReadBuf(ioctx, l.Dev, n, off)
	took := l.Clock.Now() - start
	if err != nil {
		return nil, took, err
	}
	if took > timeout {
		b.Release()
		return nil, took, fmt.Errorf("%w: read answered after %v, timeout %v", rescode.ErrIOTimeout, took.Round(time.Millisecond), timeout)
	}
	return b, took, nil
}

// write writes one freshly built sector; the caller never touches it again.
func (l *Lease) write(ctx context.Context, sector []byte, off int64, timeout time.Duration) (time.Duration, error) {
	ioctx, cancel := ioContext(ctx, timeout)
	defer cancel()
	start := l.Clock.Now()
	err := l.Dev.WriteAt(ioctx, sector, off)
	return l.Clock.Now() - start, err
}

// readOwn reads and verifies our lease sector (acquire's reads).
func (l *Lease) readOwn(ctx context.Context) (diskfmt.Leader, []byte, error) {
	pb, _, err := l.read(ctx, l.Geometry.SectorSize, l.sectorOffset(), l.Timing.IOTimeoutDuration())
	if err != nil {
		return diskfmt.Leader{}, nil, fmt.Errorf("delta lease %s:%d read: %w", l.Space, l.HostID, err)
	}
	b := append([]byte(nil), pb.Bytes()...) // one sector, kept by acquire
	pb.Release()
	rec, err := diskfmt.VerifyDelta(b, l.Space)
	if err != nil {
		return rec, b, err
	}
	return rec, b, nil
}

// buildSector returns a new sector holding rec (sealed) and, if bitmap is
// not nil, the host bitmap at byte 256; everything else is zero.
func buildSector(rec *diskfmt.Leader, sectorSize int, bitmap []byte) []byte {
	b := make([]byte, sectorSize)
	rec.Seal(b)
	if bitmap != nil {
		copy(b[diskfmt.BitmapOffset:diskfmt.BitmapOffset+diskfmt.BitmapSize], bitmap)
	}
	return b
}

// recordBytes is the 200 stored bytes of rec, checksum field as it is.
func recordBytes(rec *diskfmt.Leader) []byte {
	b := make([]byte, diskfmt.LeaderSize)
	rec.Encode(b)
	return b
}

// sameRecord compares the 200 record bytes of two raw sectors.
func sameRecord(a, b []byte) bool {
	return bytes.Equal(a[:diskfmt.LeaderSize], b[:diskfmt.LeaderSize])
}

// validate checks the Lease fields before any I/O.
func (l *Lease) validate() error {
	switch {
	case l.Dev == nil || l.Clock == nil:
		return fmt.Errorf("delta: lease without device or clock: %w", rescode.ErrEINVAL)
	case l.HostID == 0 || l.Geometry.SectorSize <= 0:
		return rescode.ErrEINVAL
	case l.Timing.IOTimeout <= 0 || l.Timing.WatchdogFireTimeout <= 0:
		return fmt.Errorf("delta: timing not set: %w", rescode.ErrEINVAL)
	}
	return nil
}

func ms(d time.Duration) int64 { return d.Milliseconds() }
