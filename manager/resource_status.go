package manager

import (
	"errors"
	"fmt"
	"slices"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/paxos"
	"github.com/gosanlock/gosanlock/wire"
)

// resFlags is the r.flags value shown in RESOURCE records.
func (r *resource) flagsText() uint32 {
	var f uint32
	if r.shared {
		f |= 0x01
	}
	if r.examining || r.examineReq {
		f |= 0x02
	}
	if r.releasing {
		f |= 0x04
	}
	if r.restrict&wire.RestrictSigkill != 0 {
		f |= 0x08
	}
	if r.restrict&wire.RestrictSigterm != 0 {
		f |= 0x10
	}
	return f
}

// StatusRecords returns the RESOURCE records of STATUS: one RESOURCE record per token
// of held and add resources, one per resource on rem and orphan
// (docs/protocol.md "Record texts").
func (m *Resources) StatusRecords() []wire.StateRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	all := make([]*resource, 0, len(m.res))
	for _, r := range m.res {
		all = append(all, r)
	}
	// newest first, as sanlock lists them
	slices.SortFunc(all, func(a, b *resource) int { return int(b.id) - int(a.id) })
	var recs []wire.StateRecord
	for _, l := range []resList{resHeld, resAdd, resRem, resOrphan} {
		for _, r := range all {
			if r.list != l {
				continue
			}
			var ss, align int
			var lver uint64
			if r.held != nil {
				// the lease's lver, for shared holds too
				ss, align = r.held.Geometry.SectorSize, r.held.Geometry.AlignSize
				lver = r.held.Leader.Lver
			}
			// ci is the holder's connection slot (ClientStatus.Order),
			// -1 for a record without a token (rem, orphan).
			one := func(pid int, tokID uint32, ci int) {
				res := wire.Resource{LockspaceName: r.key.space, Name: r.key.name, LVer: lver,
					Disks: make([]wire.Disk, len(r.disks))}
				for i, d := range r.disks {
					res.Disks[i] = wire.Disk{Path: d.Path, Offset: d.Offset, Pad1: uint32(ss), Pad2: 0xffffffff}
				}
				if r.shared {
					res.Flags |= wire.ResShared
				}
				// 5.1.1's key list: the caw keys show 0 (no CAW).
				text := fmt.Sprintf("list=%s flags=%x sector_size=%d align_size=%d lver=%d reused=%d res_id=%d "+
					"caw=%d caw_dev=%d:%d caw_off=%d token_id=%d ci=%d",
					r.list, r.flagsText(), ss, align, lver, 0, r.id, 0, 0, 0, 0, tokID, ci)
				recs = append(recs, wire.StateRecord{
					State:    wire.State{Type: wire.StateResource, Data32: uint32(int32(pid)), Data64: lver, Name: r.key.name},
					Text:     text,
					Resource: &res,
				})
			}
			if l == resHeld || l == resAdd {
				for _, t := range r.tokens {
					ci := -1
					if m.clients != nil {
						if cs, ok := m.clients.Status(t.client); ok {
							ci = cs.Order
						}
					}
					one(t.pid, t.id, ci)
				}
			} else {
				one(r.pid, 0, -1)
			}
		}
	}
	return recs
}

// Examine asks for the request records of the held resources of lockspace
// space to be read and acted on (docs/paxos.md "Examine"): after another host set our
// bit, and for EXAMINE_LOCKSPACE. It does not block.
func (m *Resources) Examine(space string) { m.examine(space, "") }

// examine marks the held resources of space (and name, when given) and
// starts one examine goroutine per resource not already being examined.
func (m *Resources) examine(space, name string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for k, r := range m.res {
		if k.space != space || (name != "" && k.name != name) || r.list != resHeld {
			continue
		}
		n++
		if r.examining {
			r.examineReq = true
			continue
		}
		if m.stopped {
			continue
		}
		r.examining = true
		m.wg.Add(1)
		m.cfg.spawn(func() { m.examineResource(r) })
	}
	return n
}

// examineResource reads r's request record and acts on it, as often as
// it was asked to.
func (m *Resources) examineResource(r *resource) {
	defer m.wg.Done()
	for {
		m.examineOnce(r)
		m.mu.Lock()
		again := r.examineReq && r.list == resHeld && !m.stopped
		r.examineReq = false
		if !again {
			r.examining = false
			m.mu.Unlock()
			return
		}
		m.mu.Unlock()
	}
}

func (m *Resources) examineOnce(r *resource) {
	m.mu.Lock()
	if r.list != resHeld || r.held == nil {
		m.mu.Unlock()
		return
	}
	pid, restrict, kp, ka := r.pid, r.restrict, r.killpath, r.killargs
	m.mu.Unlock()

	r.opMu.Lock()
	if r.held == nil {
		r.opMu.Unlock()
		return
	}
	rec, err := r.held.ReadRequest(m.baseContext())
	lver := r.held.Leader.Lver
	r.opMu.Unlock()

	// paxos.DecideExamine never acts on pid <= 0 (a shared resource has no
	// single holder: signalling pid 0 would hit a process group).
	action := paxos.DecideExamine(rec, err, lver, pid)
	if action == paxos.ExamineIgnore {
		return
	}
	sig, runKP := paxos.ExamineSignal(action, restrict, kp != "")
	m.rlog(r).Info("examine request", spaceField(r.key.space), resField(r.key.name), zap.Uint64("lver", rec.Lver),
		zap.Uint32("force_mode", rec.ForceMode), zap.Stringer("action", action), zap.Int("pid", pid))
	if runKP {
		argv := killpathArgv(kp, ka, 0)
		if err := m.cfg.RunKillpath(argv); err != nil {
			m.rlog(r).Info("killpath error", zap.String("killpath", kp), spaceField(r.key.space), resField(r.key.name),
				causeField(err, 0))
		}
		return
	}
	if err := m.cfg.Kill(pid, sig); err != nil && !errors.Is(err, unix.ESRCH) {
		m.rlog(r).Info("kill error", zap.Int("pid", pid), zap.Int("sig", int(sig)), spaceField(r.key.space),
			resField(r.key.name), causeField(err, 0))
	}
}

// Holders returns the pids whose tokens hold resource space:name.
func (m *Resources) Holders(space, name string) []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.res[resKey{space, name}]
	if r == nil {
		return nil
	}
	pids := make([]int, 0, len(r.tokens))
	for _, tk := range r.tokens {
		pids = append(pids, tk.pid)
	}
	return pids
}

// OpenDisks is the number of resource disks open (one per path).
func (m *Resources) OpenDisks() int { return m.disks.openCount() }

// HeldCount is the number of resources on the held list.
func (m *Resources) HeldCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, r := range m.res {
		if r.list == resHeld {
			n++
		}
	}
	return n
}
