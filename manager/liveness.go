package manager

import (
	"context"
	"math/rand/v2"

	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/paxos"
	"github.com/gosanlock/gosanlock/rescode"
)

// spaceLiveness is the paxos layer's view of the other hosts of one joined
// lockspace: our renewals' host status table and fresh reads of a host's
// delta lease from the lockspace disk (docs/paxos.md "Owner liveness").
type spaceLiveness struct{ run *delta.Lockspace }

var _ paxos.Liveness = spaceLiveness{}

// Liveness is the paxos.Liveness of a joined lockspace's runner: the host
// status table of our renewals and fresh reads of a host's delta lease
// (the one adapter the manager gives every paxos.Host; the simulator
// uses it too).
func Liveness(run *delta.Lockspace) paxos.Liveness { return spaceLiveness{run} }

func (l spaceLiveness) Host(hostID uint64) (paxos.HostView, bool) {
	h, first, ok := l.run.HostWithFirstCheck(hostID)
	return paxos.HostView{HostStatus: h, FirstCheck: first}, ok
}

func (l spaceLiveness) ReadDeltaLease(ctx context.Context, hostID uint64) (diskfmt.Leader, error) {
	return l.run.ReadHostLease(ctx, hostID)
}

// PaxosHost returns our membership of the joined lockspace name as the
// paxos layer needs it (host_id, generation, io_timeout, sizes, liveness),
// or -ENOSPC when the lockspace is not joined or is failing (docs/paxos.md "Acquire command"
// step 4). One Host is kept per lockspace entry and shared by its leases.
func (m *Lockspaces) PaxosHost(name string) (*paxos.Host, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sp := m.byName(listSpaces, name)
	if sp == nil || sp.run == nil || sp.end.dead() {
		return nil, rescode.ErrENOSPC
	}
	if sp.paxos == nil {
		st := sp.run.Status()
		cfg := m.conf()
		shr := cfg.ShRetries
		if shr <= 0 {
			shr = paxos.DefaultShRetries
		}
		sp.paxos = &paxos.Host{
			ID: sp.ls.HostID, Generation: st.HostGeneration, Space: sp.ls.Name,
			Geometry:  diskfmt.Geometry{SectorSize: st.SectorSize, AlignSize: st.AlignSize},
			IOTimeout: sp.ioTimeoutNow(), WatchdogFireTimeout: cfg.WatchdogFireTimeout, ShRetries: shr,
			Clock: m.cfg.Clock, Live: spaceLiveness{sp.run},
			Rand: rand.New(rand.NewPCG(sp.ls.HostID, st.HostGeneration^uint64(sp.id))),
			// Under contention across hosts (docs/paxos.md "Fairness
			// under contention").
			Fairness: paxos.DaemonFairness(),
			// The paxos lines name the resource; add the lockspace and its disk.
			Log: m.lg().With(zap.String("lockspace", sp.ls.Name), zap.String("lockspace_disk", sp.disk())),
		}
	}
	return sp.paxos, nil
}
