package manager

import (
	"slices"

	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/wire"
)

// ClientDead is called once when a registered client has gone (docs/paxos.md "Client exit", docs/protocol.md
// "Registration"): the leases of a registered client whose connection ended are released in the
// background; persistent ones become orphans. When a command is running
// for the client, that command does it when it finishes.
func (m *Resources) ClientDead(id ClientID) {
	m.mu.Lock()
	lc := m.leases[id]
	if lc == nil {
		m.mu.Unlock()
		return
	}
	if lc.busy {
		lc.dead = true
		m.mu.Unlock()
		return
	}
	toks := lc.tokens
	lc.tokens = nil
	m.forget(lc)
	m.mu.Unlock()
	m.dropTokens(toks)
}

// dropTokens handles the tokens of a dead client.
func (m *Resources) dropTokens(toks []*token) {
	for _, t := range toks {
		m.mu.Lock()
		r, _ := m.detachLocked(t)
		if r == nil {
			m.mu.Unlock()
			continue
		}
		switch {
		case r.spaceDead || r.held == nil:
			m.mu.Unlock()
			m.finish(r)
		case t.flags&wire.ResPersistent != 0:
			r.list = resOrphan
			m.mu.Unlock()
			m.rlog(r).Info("orphan", spaceField(r.key.space), resField(r.key.name), zap.Int("pid", t.pid))
		default:
			m.mu.Unlock()
			m.releaseLater(r)
		}
	}
}

// SpaceResources implements LockspaceUsage.
func (m *Resources) SpaceResources(space string) (all, orphans int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, r := range m.res {
		if k.space != space {
			continue
		}
		all++
		if r.list == resOrphan {
			orphans++
		}
	}
	return all, orphans
}

// SpaceHolders implements LockspaceUsage: the pids of registered clients
// with a token (held or being acquired) in space.
func (m *Resources) SpaceHolders(space string) []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var pids []int
	for k, r := range m.res {
		if k.space != space || (r.list != resHeld && r.list != resAdd) {
			continue
		}
		for _, t := range r.tokens {
			if !slices.Contains(pids, t.pid) {
				pids = append(pids, t.pid)
			}
		}
	}
	slices.Sort(pids)
	return pids
}

// SpaceDead implements LockspaceUsage: the tokens of space are from now on
// freed without disk I/O (the leases stay owned on disk until the other
// hosts see our host_id dead).
func (m *Resources) SpaceDead(space string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, r := range m.res {
		if k.space == space {
			r.spaceDead = true
		}
	}
}

// SpaceGone is called when lockspace space has been freed: its orphans
// are dropped from memory without disk I/O (docs/paxos.md "Orphans").
func (m *Resources) SpaceGone(space string) {
	m.mu.Lock()
	var drop []*resource
	for k, r := range m.res {
		if k.space == space && r.list == resOrphan {
			drop = append(drop, r)
		}
	}
	m.mu.Unlock()
	for _, r := range drop {
		m.finish(r)
	}
}
