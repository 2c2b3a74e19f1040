package paxos

import (
	"context"

	"go.uber.org/zap"
)

// sharedHolderDead decides whether host id's SHARED mode block of
// generation gen may be cleared (docs/paxos.md "Clearing dead shared
// holders"): our host table view v first, then, only when it says dead, a
// fresh read of the holder's delta lease (SharedHolderDead). A failed read
// keeps the holder: the exclusive acquire then gives up with -EAGAIN.
func (l *Lease) sharedHolderDead(ctx context.Context, id, gen uint64, v HostView, ok bool) bool {
	h := l.Host
	now := h.now()
	if h.bug(BugStaleShared) {
		// The broken variant: the table alone, released hosts first.
		if ok && v.LastCheck != 0 && v.Timestamp == 0 {
			return true
		}
		return !HostLive(v, ok, gen, now, h.IOTimeout, h.WatchdogFireTimeout)
	}
	if HostLive(v, ok, gen, now, h.IOTimeout, h.WatchdogFireTimeout) || h.Live == nil {
		return false
	}
	dl, err := h.Live.ReadDeltaLease(ctx, id)
	if err != nil {
		h.log().Info("shared holder kept: delta lease read failed", zap.String("resource", l.Name),
			zap.Uint64("host-id", id), zap.Error(err))
		return false
	}
	dead := SharedHolderDead(v, ok, id, gen, &dl, h.now(), h.IOTimeout, h.WatchdogFireTimeout)
	if !dead {
		h.log().Info("shared holder kept: its delta lease is newer than our host table", zap.String("resource", l.Name),
			zap.Uint64("host-id", id), zap.Uint64("generation", gen), zap.Uint64("lease-generation", dl.OwnerGeneration),
			zap.Uint64("lease-timestamp", dl.Timestamp), zap.Uint64("table-generation", v.OwnerGeneration),
			zap.Uint64("table-timestamp", v.Timestamp))
	}
	return dead
}
