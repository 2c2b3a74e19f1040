package manager

import (
	"context"

	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// SetHostDeadExt is set_host's only subcommand (SANLK_SET_HOST_DEAD_EXT).
const SetHostDeadExt = 1

// SetHost answers SET_HOST (docs/delta.md "set_host DEAD_EXT"): in the
// joined lockspace ls (its host_id must be ours), mark host h.HostID's
// delta lease DEAD_EXT. h.Generation names the incarnation the caller
// fenced (0: whatever the lease holds); another generation than the
// lease's is refused with -280. Answers as 5.1.1: a lockspace not joined
// -ENOENT, a host_id of 0 or not ours in ls, a target host_id of 0 or an
// unknown subcommand -EINVAL.
func (m *Lockspaces) SetHost(ctx context.Context, ls wire.Lockspace, cmd uint32, h wire.Host) error {
	m.mu.Lock()
	sp := m.byName(listSpaces, ls.Name)
	m.mu.Unlock()
	if sp == nil || sp.run == nil {
		return rescode.ErrENOENT
	}
	if ls.HostID == 0 || ls.HostID != sp.ls.HostID || cmd != SetHostDeadExt || h.HostID == 0 {
		return rescode.ErrEINVAL
	}
	sp.log().Warn("set_host DEAD_EXT", zap.Uint64("host_id", h.HostID), zap.Uint64("generation", h.Generation))
	out, err := sp.run.SetHostDeadExt(ctx, h.HostID, h.Generation)
	if err != nil {
		sp.log().Error("set_host DEAD_EXT failed", zap.Uint64("host_id", h.HostID), zap.Uint64("generation", h.Generation),
			zap.Error(err))
		return resultErr(err)
	}
	sp.log().Warn("set_host DEAD_EXT done", zap.Uint64("host_id", h.HostID), zap.Uint64("generation", out.OwnerGeneration),
		zap.Uint64("timestamp", out.Timestamp))
	return nil
}
