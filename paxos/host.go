package paxos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

// Liveness is the lockspace's view of the other hosts, which the paxos
// layer consults to decide whether a lease owner or a shared holder is
// alive. The daemon implements it over delta.HostTable and the lockspace
// disk; tests use a fake.
type Liveness interface {
	// Host returns a snapshot of our host status entry for hostID (filled
	// by our own renewal reads) and the table's first-check time; false
	// when the lockspace has no such entry.
	Host(hostID uint64) (HostView, bool)
	// ReadDeltaLease reads hostID's delta lease from the lockspace disk now
	// (one sector at sector hostID-1) and verifies it (magic, version,
	// lockspace name, checksum). Errors: rescode.ErrAcquireLockspace when
	// the lockspace is gone, rescode.ErrAcquireIDDisk when its disk cannot
	// be opened, a verify code, or the I/O error.
	ReadDeltaLease(ctx context.Context, hostID uint64) (diskfmt.Leader, error)
}

// Host is this host's membership in one lockspace, as the paxos layer needs
// it, plus the injected clock, randomness and logger. One Host may be shared
// by every lease of the lockspace and used from many goroutines.
type Host struct {
	ID         uint64 // our host_id
	Generation uint64 // our lockspace generation
	Space      string // lockspace name
	// Geometry is the lockspace's sector and align size. A lease's first
	// read uses them as hints before it learns the lease's own sizes
	// (docs/paxos.md "Acquire algorithm", quirk Q3).
	Geometry diskfmt.Geometry
	// IOTimeout is our io_timeout for the lockspace, seconds: the deadline
	// of every I/O, and host_dead_seconds for hosts whose lease carries 0.
	IOTimeout int
	// WatchdogFireTimeout is W in host_dead_seconds = 8*io + W.
	WatchdogFireTimeout int
	// ShRetries is how often a shared acquire blocked by a short hold is
	// retried (sanlock.conf sh_retries; the daemon default is 8).
	ShRetries int
	Clock     clock.Clock
	Live      Liveness
	// Rand draws the random backoff delays. Access is serialised by Host.
	Rand *rand.Rand
	// Log receives debug and warning lines; nil means none.
	Log *zap.Logger
	// Fairness shares a lease that several hosts contend for; the zero
	// value is sanlock's behaviour, the daemon runs DaemonFairness().
	Fairness Fairness
	// TestBugs turns on deliberately broken variants for the simulator's
	// self-test (bugs.go). It has an effect only in a build with the
	// simbugs tag (BugsCompiled); always zero outside that self-test.
	TestBugs Bugs

	randMu sync.Mutex

	// seen is, per resource name, the leader with the largest lver this
	// host life has read or written (the last one seen at that lver):
	// acquire never runs a ballot below it (decide.go, DecideRollback).
	seenMu sync.Mutex
	seen   map[string]diskfmt.Leader
	// contended holds the leases whose last grant to us saw other hosts'
	// ballots; the next acquire of one that finds it free waits first.
	contended map[string]bool
	// rivals holds the leases whose last acquire here met another host
	// (its ballots, or the lease owned by it); an uncontended grant
	// clears the mark.
	rivals map[string]bool
	// proposed holds, per lease, the largest lver for which this host
	// life wrote a phase-2 dblock naming itself (docs/paxos.md "Unknown
	// leader writes"): a later acquire must not take such a value as its
	// own grant.
	proposed map[string]uint64
}

// noteProposal records a phase-2 dblock of ours naming ourselves for lver.
func (h *Host) noteProposal(name string, lver uint64) {
	h.seenMu.Lock()
	defer h.seenMu.Unlock()
	if h.proposed == nil {
		h.proposed = map[string]uint64{}
	}
	h.proposed[name] = max(h.proposed[name], lver)
}

// lastProposal is the largest lver noteProposal recorded for name.
func (h *Host) lastProposal(name string) uint64 {
	h.seenMu.Lock()
	defer h.seenMu.Unlock()
	return h.proposed[name]
}

// seenLeader is the leader of name with the largest lver this host life
// has read or written (zero if none).
func (h *Host) seenLeader(name string) diskfmt.Leader {
	h.seenMu.Lock()
	defer h.seenMu.Unlock()
	return h.seen[name]
}

// noteLeader records a leader of name read from or written to disk.
func (h *Host) noteLeader(name string, ld *diskfmt.Leader) {
	if ld.Magic != diskfmt.PaxosMagic {
		return
	}
	h.seenMu.Lock()
	defer h.seenMu.Unlock()
	if h.seen == nil {
		h.seen = map[string]diskfmt.Leader{}
	}
	if old, ok := h.seen[name]; !ok || ld.Lver >= old.Lver || ld.Lver == 0 {
		h.seen[name] = *ld
	}
}

// DefaultShRetries is sanlock's default sh_retries.
const DefaultShRetries = 8

func (h *Host) now() uint64 { return clock.Monotime(h.Clock) }

func (h *Host) log() *zap.Logger {
	if h.Log == nil {
		return zap.NewNop()
	}
	return h.Log
}

func (h *Host) ioTimeout() time.Duration { return time.Duration(h.IOTimeout) * time.Second }

// backoff is a uniform random delay of 0..1,000,000 µs.
func (h *Host) backoff() time.Duration {
	h.randMu.Lock()
	defer h.randMu.Unlock()
	if h.Rand == nil {
		return 0
	}
	return time.Duration(h.Rand.Int64N(1_000_001)) * time.Microsecond
}

// sleep waits d on the injected clock. A cancelled ctx (daemon shutdown)
// ends the operation with -1, as sanlock's wait loop does.
func (h *Host) sleep(ctx context.Context, d time.Duration) error {
	if err := h.Clock.Sleep(ctx, d); err != nil {
		return fmt.Errorf("paxos: %v: %w", err, rescode.ErrEPERM)
	}
	return nil
}

func (h *Host) validate() error {
	switch {
	case h == nil || h.Clock == nil:
		return fmt.Errorf("paxos: host without clock: %w", rescode.ErrEINVAL)
	case h.ID == 0:
		return fmt.Errorf("paxos: host_id 0: %w", rescode.ErrEINVAL)
	case h.IOTimeout <= 0 || h.WatchdogFireTimeout <= 0:
		return fmt.Errorf("paxos: timing not set: %w", rescode.ErrEINVAL)
	}
	return nil
}

// Disk is one disk of a resource lease: the device and the lease offset on
// it. A lease has 1..4 disks with identical layouts.
type Disk struct {
	Dev    diskfmt.Device
	Offset int64
}

// Lease is one resource lease as this host reaches it.
type Lease struct {
	Host  *Host
	Name  string // resource name
	Disks []Disk

	guard WriteGuard // set on the copy one guarded request runs on (guardedBy)
}

func (l *Lease) validate() error {
	if err := l.Host.validate(); err != nil {
		return err
	}
	if len(l.Disks) == 0 || len(l.Disks) > diskfmt.MaxDisks {
		return fmt.Errorf("paxos: %d disks: %w", len(l.Disks), rescode.ErrERANGE)
	}
	for _, d := range l.Disks {
		if d.Dev == nil {
			return fmt.Errorf("paxos: nil device: %w", rescode.ErrEINVAL)
		}
	}
	return nil
}

// hints are the sizes the first read of an acquire uses: the lockspace's,
// or the first device's sector size with its legacy align when unset.
func (l *Lease) hints() (ss, align int) {
	g := l.Host.Geometry
	if g.SectorSize != 0 && g.AlignSize != 0 {
		return g.SectorSize, g.AlignSize
	}
	ss = l.Disks[0].Dev.SectorSize()
	return ss, diskfmt.LegacyAlign(ss)
}

// Error is a failed operation. Code is the sanlock result (rescode.CodeOf
// finds it through Unwrap). Leader, when set, is the leader that decided the
// result: the blocking leader for -243/-247, the committed one for
// -244/-245, the last one seen for -246.
type Error struct {
	Op     string
	Code   rescode.Code
	Leader *diskfmt.Leader
	Err    error // underlying detail, may be nil
}

func (e *Error) Error() string {
	s := fmt.Sprintf("paxos %s: %v", e.Op, e.Code)
	if e.Leader != nil {
		s += fmt.Sprintf(" (leader lver %d owner %d/%d ts %d)", e.Leader.Lver, e.Leader.OwnerID,
			e.Leader.OwnerGeneration, e.Leader.Timestamp)
	}
	if e.Err != nil && !errors.Is(e.Err, e.Code) {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the Code, so errors.Is(err, rescode.ErrAcquireIDLive) works.
func (e *Error) Unwrap() error { return e.Code }

// wrap turns err into an *Error for op, keeping an existing *Error.
func wrap(op string, err error, ld *diskfmt.Leader) error {
	if err == nil {
		return nil
	}
	var pe *Error
	if errors.As(err, &pe) {
		return err
	}
	e := &Error{Op: op, Code: rescode.CodeOf(err), Err: err}
	if ld != nil {
		c := *ld
		e.Leader = &c
	}
	return e
}

// Errno results used by this package that diskfmt does not name.
const (
	ErrE2BIG    rescode.Code = -7
	ErrEEXIST   rescode.Code = -17
	ErrEALREADY rescode.Code = -114
	ErrEUCLEAN  rescode.Code = -117
)
