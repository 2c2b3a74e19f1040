package delta

import (
	"github.com/gosanlock/gosanlock/rescode"
)

// OwnLeaseState is the result of the own-lease check (docs/delta.md "Own-lease check").
type OwnLeaseState int

const (
	// OwnLeaseGood: renewed less than id_renewal_warn_seconds ago.
	OwnLeaseGood OwnLeaseState = iota
	// OwnLeaseWarn: the gap is at least 6N but below 8N; still passing.
	OwnLeaseWarn
	// OwnLeaseFailed: the gap reached 8N: the lease may be lost; recovery.
	OwnLeaseFailed
	// OwnLeaseCorrupt: a renewal found the lease overwritten or damaged.
	OwnLeaseCorrupt
)

func (s OwnLeaseState) String() string {
	switch s {
	case OwnLeaseGood:
		return "good"
	case OwnLeaseWarn:
		return "warning"
	case OwnLeaseFailed:
		return "failed"
	case OwnLeaseCorrupt:
		return "corrupt"
	}
	return "unknown"
}

// Failed reports whether the check failed (recovery must start).
func (s OwnLeaseState) Failed() bool { return s == OwnLeaseFailed || s == OwnLeaseCorrupt }

// IsCorrupt reports whether a renewal result means our lease was
// overwritten or damaged (docs/delta.md "Corrupt lease"), which fails the lockspace at
// once instead of after 8N.
func IsCorrupt(c rescode.Code) bool {
	switch c {
	case rescode.ErrRenewOwner, rescode.ErrRenewDiff, rescode.ErrDeadExt, rescode.ErrLeaderMagic,
		rescode.ErrLeaderVersion, rescode.ErrLeaderSectorSize, rescode.ErrLeaderLockspace,
		rescode.ErrLeaderChecksum:
		return true
	}
	return false
}

// CheckOwnLease is check_our_lease as a pure function of our clock (now,
// whole seconds), the timestamp of our last successful renewal, the sticky
// corrupt result and the own io_timeout. It returns the state and the gap.
func CheckOwnLease(now, lastSuccess uint64, corrupt rescode.Code, ownIO int) (OwnLeaseState, uint64) {
	var gap uint64
	if now > lastSuccess {
		gap = now - lastSuccess
	}
	switch {
	case corrupt != 0:
		return OwnLeaseCorrupt, gap
	case gap >= uint64(IDRenewalFailSeconds(ownIO)):
		return OwnLeaseFailed, gap
	case gap >= uint64(IDRenewalWarnSeconds(ownIO)):
		return OwnLeaseWarn, gap
	}
	return OwnLeaseGood, gap
}
