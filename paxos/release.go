package paxos

import (
	"context"

	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/diskfmt"
)

// paxosRelease frees the leader (docs/paxos.md "Leader release"): one leader read, then a
// leader write only if we wrote the current leader and it is still the one
// we hold (last; nil means whatever is on disk). Skipping the write returns
// nil.
func (l *Lease) paxosRelease(ctx context.Context, ss int, last *diskfmt.Leader, rename string) error {
	h := l.Host
	cur, err := l.leaderRead(ctx, ss)
	if err != nil {
		return err
	}
	h.noteLeader(l.Name, &cur)
	write, err := DecideRelease(&cur, last, h.ID, h.Generation)
	if err != nil {
		return err
	}
	if !write {
		h.log().Debug("release skips the leader write", zap.String("resource", l.Name),
			zap.Uint64("lver", cur.Lver), zap.Uint64("writer", cur.WriteID))
		return nil
	}
	nl := ReleaseLeader(cur, h.ID, h.Generation, h.now(), rename)
	if err := l.writeLeader(ctx, &nl, ss); err != nil {
		return err
	}
	h.noteLeader(l.Name, &nl)
	return nil
}
