package delta

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/diskio"
	"github.com/gosanlock/gosanlock/rescode"
)

// Config describes one lockspace membership of this host.
type Config struct {
	Dev    diskfmt.Device
	Offset int64  // lockspace start on Dev
	Space  string // lockspace name
	HostID uint64
	// HostName is written into the lease; it tells hosts that use the same
	// host_id apart and allows the fast reacquire of our own stale lease.
	HostName string
	// Geometry of the lockspace; zero means "read sector 0 at start", as
	// the daemon does (docs/delta.md "Lockspace start-up").
	Geometry diskfmt.Geometry
	// IOTimeout is the own io_timeout in seconds (0: DefaultIOTimeout).
	IOTimeout int
	// WatchdogFireTimeout is W in seconds (0: DefaultWatchdogFireTimeout).
	WatchdogFireTimeout int
	// SetBitmapSeconds is how long a notification bit stays set (0: 6N).
	SetBitmapSeconds int
	// HistorySize is the renewal history length (0: the default 180;
	// negative: no history).
	HistorySize int
	Clock       clock.Clock
	// Log receives the log lines: sanlock's wording, then fields. The
	// caller adds what delta does not know (the disk path). nil: nothing.
	Log *zap.Logger
	// NoDelay joins without the acquire waits (Lease.NoDelay).
	NoDelay bool
	// DebugRenew logs every successful renewal ("renewed T delta_length D
	// interval I"); without it only a renewal that took too long is
	// logged, as 3.8.5 does without debug_renew.
	DebugRenew bool
	// OnAcquired runs after a successful acquire, before the first renewal
	// (the daemon registers with wdmd here). An error fails the acquire with
	// rescode.CodeOf(err) and the lease is released.
	OnAcquired func(ctx context.Context, lastSuccess uint64) error
	// OnRenewed runs after each successful renewal while not stopping, with
	// the new timestamp (the daemon calls wdmd test_live here). It runs on
	// the renewal goroutine without any lock held.
	OnRenewed func(ts uint64)
	// OnRenewal, when set, runs after each renewal attempt with its error
	// (nil: success) and I/O durations in ms (-1: not measured), on the
	// renewal goroutine without any lock held (the daemon's metrics).
	OnRenewal func(err error, readMs, writeMs int64)
}

// Status is the published state of a lockspace (docs/delta.md "Lockspace state").
// Results are 0 before the first attempt, then rescode.OK or an error code;
// times are our monotime in seconds.
type Status struct {
	Space              string
	HostID             uint64
	IOTimeout          int
	SectorSize         int
	AlignSize          int
	SetBitmapSeconds   int
	HostGeneration     uint64
	Version            uint32       // the version of our delta lease record (0 before the join)
	NoTimeout          bool         // our own lease carries NO_TIMEOUT (sanlock 5.x): a NO_TIMEOUT lockspace
	RenewFail          bool         // the own-lease check has failed once
	CorruptResult      rescode.Code // first corrupt renewal result, sticky
	AcquireLastResult  rescode.Code
	AcquireLastAttempt uint64
	AcquireLastSuccess uint64
	RenewalLastResult  rescode.Code
	RenewalLastAttempt uint64
	RenewalLastSuccess uint64
	Reads              uint64 // successful renewal reads published
	Joined             bool   // acquired (and first renewal done when due)
	Stopped            bool   // the renewal loop has ended
	Released           bool   // the lease was released on stop
}

// Lockspace runs one host's membership of a lockspace: Run acquires the
// host_id lease and renews it until its context is cancelled, then releases
// it. Other goroutines (the daemon's main loop, request handlers) read the
// published state and feed notifications through the methods; they share a
// mutex that is never held during disk I/O.
//
// # Usage
//
//  1. New(cfg), then go Run(ctx).
//  2. Wait for Joined(); check Status().AcquireLastResult (rescode.OK) or
//     Run's error.
//  3. Every second: CheckOwnLease(); if it fails, start recovery; otherwise
//     ProcessHosts() and deliver its events and requests.
//  4. Cancel ctx to leave; Run releases the lease if the last attempt
//     succeeded and returns. Done() is closed after that.
type Lockspace struct {
	cfg Config
	// timing and lease.Timing change only on the runner goroutine (an
	// io_timeout switch, SetIOTimeout), under mu; other goroutines read
	// them under mu (Timing).
	timing Timing
	lease  Lease // Geometry filled by Run before the acquire
	// newIO is the io_timeout SET_CONFIG asked for, applied by the next
	// renewal (0: none).
	newIO atomic.Int32

	joined chan struct{}
	done   chan struct{}

	mu        sync.Mutex
	status    Status
	history   *History
	hosts     *HostTable // nil until the geometry is known
	notifier  *Notifier  // nil until the geometry is known
	processed uint64     // value of status.Reads at the last ProcessHosts

	halted atomic.Bool // Halt: no more renewals, no release

	pause pauseGate // handover: Pause/Unpause (handover.go)

	// lateAbort, when set (ReleaseWhenBack), makes a Run that stops after
	// a failed renewal keep trying its release until LateReleaseDeadline
	// or until the context ends.
	lateAbort atomic.Pointer[context.Context]
}

// ErrLateReleaseGivenUp is Run's error when the storage did not answer
// again before LateReleaseDeadline: the lease was left as it was.
var ErrLateReleaseGivenUp = errors.New("delta: release given up: storage did not return in time")

// ReleaseWhenBack tells Run that nothing uses the lockspace any more (the
// daemon has seen every holder gone), so that, if it stops while its
// renewals are failing, it may release the lease once the storage answers
// again: it retries (1 s, then doubling up to 4 s between attempts) until
// LateReleaseDeadline, and only writes if a read shows the lease is still
// ours. abort ends the attempts early (daemon exit). Call it before
// cancelling Run's context.
func (ls *Lockspace) ReleaseWhenBack(abort context.Context) { ls.lateAbort.Store(&abort) }

// New validates cfg and returns a lockspace that is not running yet.
func New(cfg Config) (*Lockspace, error) {
	if cfg.Dev == nil || cfg.Clock == nil {
		return nil, fmt.Errorf("delta: config needs a device and a clock: %w", rescode.ErrEINVAL)
	}
	if cfg.Space == "" || cfg.HostID == 0 || cfg.HostID > MaxHostID {
		return nil, rescode.ErrEINVAL
	}
	t := NewTiming(cfg.IOTimeout, cfg.WatchdogFireTimeout)
	sbs := cfg.SetBitmapSeconds
	if sbs <= 0 {
		sbs = t.SetBitmapSeconds()
	}
	hsize := cfg.HistorySize
	if hsize == 0 {
		hsize = DefaultRenewalHistorySize
	}
	lg := cfg.Log
	ls := &Lockspace{
		cfg:    cfg,
		timing: t,
		lease: Lease{Dev: cfg.Dev, Offset: cfg.Offset, Geometry: cfg.Geometry, Space: cfg.Space,
			HostID: cfg.HostID, Timing: t, Clock: cfg.Clock, Log: nopOr(lg), NoDelay: cfg.NoDelay},
		joined:  make(chan struct{}),
		done:    make(chan struct{}),
		history: NewHistory(hsize),
		status: Status{Space: cfg.Space, HostID: cfg.HostID, IOTimeout: t.IOTimeout,
			SetBitmapSeconds: sbs},
	}
	if cfg.Geometry.SectorSize != 0 {
		ls.setGeometry(cfg.Geometry)
	}
	return ls, nil
}

func (ls *Lockspace) log() *zap.Logger { return ls.lease.Log }

func (ls *Lockspace) now() uint64 { return clock.Monotime(ls.cfg.Clock) }

// Timing returns the own timing.
func (ls *Lockspace) Timing() Timing {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.timing
}

// MaxSetIOTimeout is the largest io_timeout SetIOTimeout takes: the delta
// lease keeps only the low 8 bits of it (DiskIOTimeout).
const MaxSetIOTimeout = 255

// SetIOTimeout asks for the own io_timeout io (seconds) from the next
// renewal on (SET_CONFIG IO_TIMEOUT, docs/delta.md "Changing the
// io_timeout"). Other hosts judge us by the io_timeout in our lease, so
// the own deadlines must never be later than what the lease says: a
// lower value is taken into the own timing before the renewal writes
// it, a higher one only after a renewal has written it.
func (ls *Lockspace) SetIOTimeout(io int) error {
	if io <= 0 || io > MaxSetIOTimeout {
		return rescode.ErrEINVAL
	}
	ls.newIO.Store(int32(io))
	ls.log().Info("set_config update io_timeout", zap.Int("from", ls.Timing().IOTimeout), zap.Int("to", io))
	return nil
}

// setTiming switches the own timing to io_timeout io (runner goroutine).
func (ls *Lockspace) setTiming(io int) {
	t := NewTiming(io, ls.timing.WatchdogFireTimeout)
	ls.mu.Lock()
	ls.timing, ls.lease.Timing = t, t
	ls.status.IOTimeout = io
	ls.mu.Unlock()
	ls.log().Info("io_timeout changed", zap.Int("io_timeout", io))
}

// Joined is closed when the acquire has finished, successfully or not.
func (ls *Lockspace) Joined() <-chan struct{} { return ls.joined }

// Done is closed when Run has returned.
func (ls *Lockspace) Done() <-chan struct{} { return ls.done }

func (ls *Lockspace) setGeometry(g diskfmt.Geometry) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.lease.Geometry = g // written once, before the renewer starts
	ls.status.SectorSize, ls.status.AlignSize = g.SectorSize, g.AlignSize
	ls.hosts = NewHostTable(g.MaxHosts)
	ls.notifier = NewNotifier(g.MaxHosts, ls.status.SetBitmapSeconds)
}

// Run joins the lockspace and renews our lease until ctx is cancelled. It
// returns the acquire error (a diskfmt result via rescode.CodeOf), or the
// release error, or nil. Run may be called once.
func (ls *Lockspace) Run(ctx context.Context) error {
	defer close(ls.done)
	begin := ls.now()
	acq, err := ls.join(ctx)
	ls.mu.Lock()
	ls.status.AcquireLastAttempt = begin
	ls.status.RenewalLastAttempt = begin
	if err != nil {
		ls.status.AcquireLastResult = rescode.CodeOf(err)
		ls.status.RenewalLastResult = ls.status.AcquireLastResult
		ls.status.Stopped = true
		ls.mu.Unlock()
		ls.log().Info("add_lockspace fail", resultField(err), causeField(err, ls.timing.IOTimeout))
		close(ls.joined)
		return err
	}
	ls.status.AcquireLastResult, ls.status.RenewalLastResult = rescode.OK, rescode.OK
	ls.status.AcquireLastSuccess, ls.status.RenewalLastSuccess = acq.LastSuccess, acq.LastSuccess
	ls.status.HostGeneration = acq.Leader.OwnerGeneration
	ls.status.Version = acq.Leader.Version
	ls.status.NoTimeout = acq.Leader.NoTimeout()
	ls.history.Success(acq.LastSuccess, 0, 0)
	ls.mu.Unlock()

	r := renewer{ls: ls, last: acq.Leader, prevOK: true, lastSuccess: acq.LastSuccess}
	// Hazard of docs/delta.md "Completing the add": the acquire's timestamp predates its short
	// delay, so the first renewal may already be due. Do it before anyone
	// is told that we joined, so no own-lease check sees a stale gap.
	if ls.now()-r.lastSuccess >= uint64(ls.timing.IDRenewalSeconds()) {
		if sleepFor(ctx, ls.cfg.Clock, 500*time.Millisecond) == nil {
			r.renew(ctx)
		}
	}
	ls.mu.Lock()
	ls.status.Joined = true
	ls.mu.Unlock()
	close(ls.joined)

	return ls.renewUntilDone(ctx, &r)
}

// join reads the sizes if needed and acquires the lease.
func (ls *Lockspace) join(ctx context.Context) (Acquired, error) {
	if ls.lease.Geometry.SectorSize == 0 {
		ioctx, cancel := ioContext(ctx, ls.timing.IOTimeoutDuration())
		g, err := diskfmt.LockspaceGeometry(ioctx, ls.cfg.Dev, ls.cfg.Offset)
		cancel()
		if err != nil {
			return Acquired{}, err
		}
		ls.setGeometry(g)
	}
	if ls.cfg.HostID > uint64(ls.lease.Geometry.MaxHosts) {
		return Acquired{}, rescode.ErrAddLSInvalidHostID
	}
	acq, err := ls.lease.Acquire(ctx, ls.cfg.HostName)
	if err != nil {
		return acq, err
	}
	if ls.cfg.OnAcquired != nil {
		if herr := ls.cfg.OnAcquired(ctx, acq.LastSuccess); herr != nil {
			if rerr := ls.lease.Release(ctx, acq.Leader); rerr != nil {
				ls.log().Info("release after failed join", causeField(rerr, ls.timing.IOTimeout))
			}
			return Acquired{}, herr
		}
	}
	return acq, nil
}

// renewer is the state private to the renewal goroutine.
type renewer struct {
	ls          *Lockspace
	last        diskfmt.Leader // our last good record
	prevOK      bool           // last acquire/renewal attempt succeeded
	lastSuccess uint64

	// ioCtx is the renewals' I/O context: background I/O, the caller's
	// cancellation stripped (each I/O has its own timeout), made at the
	// first renewal (a renewer runs under one context all its life).
	ioCtx context.Context
}

// releaseLate is the release after failed renewals (ReleaseWhenBack).
func (r *renewer) releaseLate(abort context.Context) error {
	ls := r.ls
	giveUp := LateReleaseDeadline(r.lastSuccess, ls.timing)
	ls.log().Info("delta_release when storage returns", zap.Uint64("last_success", r.lastSuccess), zap.Uint64("until", giveUp))
	wait := time.Second
	for {
		if ls.now() >= giveUp {
			ls.log().Info("delta_release given up: storage did not return", zap.Uint64("now", ls.now()))
			return ErrLateReleaseGivenUp
		}
		err := ls.lease.ReleaseIfOwned(abort, r.last)
		if err == nil {
			ls.log().Info("delta_release after storage returned", zap.Uint64("seconds_after_last_success", ls.now()-r.lastSuccess))
			return nil
		}
		code := rescode.CodeOf(err)
		if code == rescode.ErrRenewOwner || IsCorrupt(code) {
			ls.log().Info("delta_release not done", causeField(err, ls.timing.IOTimeout))
			return err
		}
		left := time.Duration(giveUp-min(giveUp, ls.now())) * time.Second
		if sleepFor(abort, ls.cfg.Clock, min(wait, left)) != nil {
			return err
		}
		wait = min(2*wait, 4*time.Second)
	}
}

// Halt stops the renewals for good without releasing the lease, as if this
// host had died: the lease expires on disk, the own-lease check fails and
// the other hosts see us dead after host_dead_seconds. The daemon halts a
// lockspace whose watchdog connection broke (docs/wdmd.md "wdmd crash"): it must not
// look alive while the host is about to be reset.
func (ls *Lockspace) Halt() { ls.halted.Store(true) }

// renew runs one renewal and publishes its outcome (docs/delta.md "Publishing a renewal").
func (r *renewer) renew(ctx context.Context) {
	ls := r.ls
	begin := ls.now()
	ls.mu.Lock()
	bitmap, ev := ls.notifier.Build(begin, ls.cfg.HostID)
	ls.mu.Unlock()

	// Renewals are background I/O: their latency does not matter, their
	// wake-ups of an idle process do (diskio.Background).
	if r.ioCtx == nil {
		r.ioCtx = context.WithoutCancel(diskio.Background(ctx))
	}
	// A new io_timeout (SetIOTimeout): a lower one rules our deadlines
	// before the lease says it, a higher one after.
	raise := 0
	if io := int(ls.newIO.Load()); io != 0 {
		switch {
		case io < ls.timing.IOTimeout:
			ls.setTiming(io)
			ls.newIO.CompareAndSwap(int32(io), 0)
		case io > ls.timing.IOTimeout:
			raise = io
		default:
			ls.newIO.CompareAndSwap(int32(io), 0)
		}
	}
	out, err := ls.lease.Renew(r.ioCtx, RenewInput{Last: r.last, PrevOK: r.prevOK, Bitmap: bitmap, Event: ev, RecordIO: raise})
	if err == nil && raise != 0 {
		ls.setTiming(raise)
		ls.newIO.CompareAndSwap(int32(raise), 0)
	}
	code := rescode.CodeOf(err)

	ls.mu.Lock()
	ls.status.RenewalLastAttempt = begin
	if err == nil {
		ls.status.RenewalLastResult = rescode.OK
		ls.status.RenewalLastSuccess = out.Timestamp
		ls.history.Success(out.Timestamp, out.ReadMs, out.WriteMs)
	} else {
		ls.status.RenewalLastResult = code
		if ls.status.CorruptResult == 0 && IsCorrupt(code) {
			ls.status.CorruptResult = code
		}
		ls.history.Failure(code)
	}
	if out.Area != nil {
		// The host table keeps only the records that changed, for the
		// next ProcessHosts; the area goes back to the shared pool at
		// once, so idle lockspaces hold no read buffer between renewals.
		ls.hosts.Stage(out.Area, ls.lease.Geometry, ls.cfg.Space, ls.cfg.HostID)
		ls.status.Reads++
	}
	ls.mu.Unlock()
	out.AreaBuf.Release()
	if ls.cfg.OnRenewal != nil {
		ls.cfg.OnRenewal(err, out.ReadMs, out.WriteMs)
	}

	if err != nil {
		r.prevOK = false
		ls.log().Info("renewal error", resultField(err), zap.Uint64("delta_length", ls.now()-begin),
			zap.Uint64("last_success", r.lastSuccess), causeField(err, ls.timing.IOTimeout))
		return
	}
	interval := out.Timestamp - r.lastSuccess
	r.last, r.prevOK, r.lastSuccess = out.Leader, true, out.Timestamp
	if d := ls.now() - begin; d > uint64(ls.timing.IDRenewalSeconds()) {
		ls.log().Info("renewed too long", zap.Uint64("timestamp", out.Timestamp), zap.Uint64("delta_length", d))
	} else if ls.cfg.DebugRenew {
		ls.log().Info("renewed", zap.Uint64("timestamp", out.Timestamp), zap.Uint64("delta_length", d), zap.Uint64("interval", interval))
	}
	if ls.cfg.OnRenewed != nil && ctx.Err() == nil {
		ls.cfg.OnRenewed(out.Timestamp)
	}
}

// Status returns a snapshot of the published state.
func (ls *Lockspace) Status() Status {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.status
}

// Renewals returns the renewal history, oldest first.
func (ls *Lockspace) Renewals() []HistoryEntry {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.history.Entries()
}

// CheckOwnLease runs check_our_lease now (docs/delta.md "Own-lease check") and records
// a failure (RenewFail). The main loop calls it every second.
func (ls *Lockspace) CheckOwnLease() (OwnLeaseState, uint64) {
	now := ls.now()
	ls.mu.Lock()
	st, gap := CheckOwnLease(now, ls.status.RenewalLastSuccess, ls.status.CorruptResult, ls.timing.IOTimeout)
	if st.Failed() {
		ls.status.RenewFail = true
	}
	last, corrupt := ls.status.RenewalLastSuccess, ls.status.CorruptResult
	ls.mu.Unlock()
	switch st {
	case OwnLeaseCorrupt:
		ls.log().Info("check_our_lease corrupt", zap.String("result", corrupt.LogString()))
	case OwnLeaseFailed:
		ls.log().Info("check_our_lease failed", zap.Uint64("gap", gap))
	case OwnLeaseWarn:
		ls.log().Info("check_our_lease warning", zap.Uint64("gap", gap), zap.Uint64("last_success", last))
	}
	return st, gap
}

// ProcessHosts updates the host table from the newest renewal read, if one
// arrived since the last call (docs/delta.md "Watching other hosts"). ok is false when
// there was nothing new.
func (ls *Lockspace) ProcessHosts() (res ProcessResult, ok bool) {
	now := ls.now()
	ls.mu.Lock()
	if ls.hosts == nil || ls.status.Reads == ls.processed {
		ls.mu.Unlock()
		return ProcessResult{}, false
	}
	ls.processed = ls.status.Reads
	res = ls.hosts.Apply(now, ls.cfg.Space, ls.status.SetBitmapSeconds)
	ls.mu.Unlock()
	for _, line := range res.Log {
		ls.log().Info(line)
	}
	return res, true
}

// GetHosts answers get_hosts (docs/delta.md "get_hosts"); -EAGAIN before the
// first ProcessHosts.
func (ls *Lockspace) GetHosts(hostID uint64) ([]HostInfo, error) {
	now := ls.now()
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.hosts == nil {
		return nil, rescode.ErrEAGAIN
	}
	return ls.hosts.GetHosts(hostID, now, ls.cfg.HostID, ls.timing.WatchdogFireTimeout)
}

// HostState is the state of one host now.
func (ls *Lockspace) HostState(hostID uint64) HostState {
	now := ls.now()
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.hosts == nil {
		return HostUnknown
	}
	return ls.hosts.State(hostID, now, ls.cfg.HostID, ls.timing.WatchdogFireTimeout)
}

// HostStatuses lists the host table entries host_status shows.
func (ls *Lockspace) HostStatuses() []HostStatus {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.hosts == nil {
		return nil
	}
	return ls.hosts.Statuses()
}

// Host returns one host table entry. Its IOTimeout is as found on disk;
// callers judging liveness for paxos use OtherIOTimeout to replace 0 by
// the own value (docs/delta.md "Host liveness for paxos").
func (ls *Lockspace) Host(hostID uint64) (HostStatus, bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.hosts == nil {
		return HostStatus{}, false
	}
	return ls.hosts.Host(hostID)
}

// errNotJoined is returned by notification calls before the sizes are known.
var errNotJoined = fmt.Errorf("delta: lockspace not joined: %w", rescode.ErrENOENT)

// SetEvent queues a host event for ev.HostID (docs/delta.md "set_event"); it is
// written by the following renewals while the target's bit is set.
func (ls *Lockspace) SetEvent(ev HostEvent, flags uint32) error {
	now := ls.now()
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.notifier == nil {
		return errNotJoined
	}
	err := ls.notifier.SetEvent(now, ev, flags, func(id uint64) uint64 {
		h, _ := ls.hosts.Host(id)
		return h.OwnerGeneration
	})
	if errors.Is(err, rescode.ErrEBUSY) {
		ls.log().Info(diskfmt.Cause(err, 0))
	}
	return err
}

// Request sets hostID's notification bit for set_bitmap_seconds, telling
// that host to look at requests for the resources it holds.
func (ls *Lockspace) Request(hostID uint64) error {
	now := ls.now()
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.notifier == nil {
		return errNotJoined
	}
	return ls.notifier.Request(hostID, now)
}

// HostWithFirstCheck returns one host table entry together with the table's
// first-check time (our monotime; 0 before the first processing), which is
// what the paxos layer's owner liveness check needs (docs/paxos.md "Owner liveness").
func (ls *Lockspace) HostWithFirstCheck(hostID uint64) (HostStatus, uint64, bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.hosts == nil {
		return HostStatus{}, 0, false
	}
	h, ok := ls.hosts.Host(hostID)
	return h, ls.hosts.FirstCheck(), ok
}

// ReadHostLease reads and verifies hostID's delta lease from the lockspace
// disk now (one sector). Before the geometry is known it fails with
// rescode.ErrAcquireLockspace.
func (ls *Lockspace) ReadHostLease(ctx context.Context, hostID uint64) (diskfmt.Leader, error) {
	ls.mu.Lock()
	g := ls.lease.Geometry
	joined := ls.hosts != nil
	ls.mu.Unlock()
	if !joined || g.SectorSize == 0 {
		return diskfmt.Leader{}, rescode.ErrAcquireLockspace
	}
	ld, _, err := diskfmt.ReadDeltaLeader(ctx, ls.cfg.Dev, ls.cfg.Offset, g, ls.cfg.Space, hostID)
	return ld, err
}
