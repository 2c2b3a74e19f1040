package delta

import "time"

// Defaults of the timing model (docs/timing.md "Inputs"). Values are seconds
// unless stated otherwise.
const (
	DefaultIOTimeout           = 10  // own io_timeout when a request gives 0
	DefaultWatchdogFireTimeout = 60  // W: the same on every host
	DefaultKillGraceSeconds    = 40  // daemon -g
	DefaultRenewalHistorySize  = 180 // daemon -H
)

// The derived values are pure functions of an io_timeout N (and W). Which
// N to pass matters (docs/timing.md "Which io_timeout"): the own value for our renewal
// cadence, our own warn/fail checks and I/O timeouts; the value found in
// another host's lease for judging that host FAIL/DEAD and for the acquire
// delays.

// IDRenewalSeconds is the wait between a successful renewal and the next
// attempt: 2N.
func IDRenewalSeconds(n int) int { return 2 * n }

// IDRenewalWarnSeconds is the renewal gap from which the own-lease check
// warns: 6N.
func IDRenewalWarnSeconds(n int) int { return 6 * n }

// IDRenewalFailSeconds is the renewal gap at which the own-lease check fails
// (own N) or another host becomes FAIL (its N): 8N.
func IDRenewalFailSeconds(n int) int { return 8 * n }

// HostDeadSeconds is the time after which a host that stopped renewing is
// DEAD: 8N + W. With the own N it is also the renewal write's I/O timeout.
func HostDeadSeconds(n, w int) int { return 8*n + w }

// DeltaLargeDelay is 2N + 6N = 8N (N from the lease being acquired).
func DeltaLargeDelay(n int) int { return 2*n + 6*n }

// DeltaShortDelay is the wait after the acquire write: 2N, N from the lease
// as it was before our write.
func DeltaShortDelay(n int) int { return 2 * n }

// AcquireHeldDelay is how long acquire watches a lease that is not free and
// not ours: max(host_dead_seconds, delta_large_delay) of the lease's N.
func AcquireHeldDelay(n, w int) int { return max(HostDeadSeconds(n, w), DeltaLargeDelay(n)) }

// SetBitmapSecondsFor is the default set_bitmap_seconds: 6N of the own N.
func SetBitmapSecondsFor(n int) int { return 6 * n }

// LateReleaseDeadline is when a lockspace that stopped after failed
// renewals stops trying to write its release (timestamp 0) once the
// storage answers again: last_success + host_dead_seconds - 2*io_timeout
// (our monotime seconds). No other host can have judged our lease dead,
// and so taken our host_id, before last_success + host_dead_seconds; the
// release (a read that checks the lease is still ours, then one write,
// each given io_timeout) is only started before this deadline, so the
// daemon is done waiting for it before that. A write the storage holds
// past its timeout cannot be recalled: it reaches the disk when the
// storage lets it through (docs/reliability.md "Late release").
// The release at a stop after a successful renewal is not started after
// this deadline either.
func LateReleaseDeadline(lastSuccess uint64, t Timing) uint64 {
	return lastSuccess + uint64(t.HostDeadSeconds()) - uint64(2*t.IOTimeout)
}

// KillGraceEnd is the monotime at which recovery switches from the graceful
// signal to SIGKILL: last_success + 8N + grace (own N).
func KillGraceEnd(lastSuccess uint64, n, grace int) uint64 {
	return lastSuccess + uint64(IDRenewalFailSeconds(n)+grace)
}

// OtherIOTimeout is the io_timeout to use for another host's lease: the value
// on disk, or own when the lease carries 0 (docs/timing.md "Which io_timeout"; used by
// acquire and by host_info, not by the host state of docs/delta.md "Host states").
func OtherIOTimeout(leaseIO uint16, own int) int {
	if leaseIO == 0 {
		return own
	}
	return int(leaseIO)
}

// DiskIOTimeout is the io_timeout value acquire and renewal write into a
// lease: only the low 8 bits survive (docs/timing.md "Mixed io_timeouts"; init writes the
// full value).
func DiskIOTimeout(own int) uint16 { return uint16(own & 0xFF) }

// Timing is the own timing of one lockspace on one host.
type Timing struct {
	IOTimeout           int // own N, seconds (> 0)
	WatchdogFireTimeout int // W, seconds (> 0)
}

// NewTiming fills defaults: io 0 means DefaultIOTimeout, w 0 means
// DefaultWatchdogFireTimeout.
func NewTiming(io, w int) Timing {
	if io <= 0 {
		io = DefaultIOTimeout
	}
	if w <= 0 {
		w = DefaultWatchdogFireTimeout
	}
	return Timing{IOTimeout: io, WatchdogFireTimeout: w}
}

// IDRenewalSeconds is 2N (own).
func (t Timing) IDRenewalSeconds() int { return IDRenewalSeconds(t.IOTimeout) }

// IDRenewalWarnSeconds is 6N (own).
func (t Timing) IDRenewalWarnSeconds() int { return IDRenewalWarnSeconds(t.IOTimeout) }

// IDRenewalFailSeconds is 8N (own).
func (t Timing) IDRenewalFailSeconds() int { return IDRenewalFailSeconds(t.IOTimeout) }

// HostDeadSeconds is 8N + W (own).
func (t Timing) HostDeadSeconds() int { return HostDeadSeconds(t.IOTimeout, t.WatchdogFireTimeout) }

// SetBitmapSeconds is the default 6N (own).
func (t Timing) SetBitmapSeconds() int { return SetBitmapSecondsFor(t.IOTimeout) }

// Per-I/O timeouts (docs/timing.md "Per-I/O timeouts").

// IOTimeoutDuration is the timeout of the start-up size read, every acquire read
// and write, the renewal read and the release write: own N.
func (t Timing) IOTimeoutDuration() time.Duration { return seconds(t.IOTimeout) }

// RenewWriteTimeout is the renewal write's timeout: host_dead_seconds of
// the own N.
func (t Timing) RenewWriteTimeout() time.Duration { return seconds(t.HostDeadSeconds()) }

func seconds(n int) time.Duration { return time.Duration(n) * time.Second }
