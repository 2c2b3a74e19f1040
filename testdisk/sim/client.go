package sim

import (
	"fmt"
	"strconv"
	"time"

	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// client is a simulated registered process, entered in the manager's
// client registry as the daemon enters a connection: it acquires and
// releases through the manager's typed API, can die holding leases, and
// is signalled by the manager's escalation (inst.kill).
type client struct {
	in    *inst
	id    manager.ClientID
	pid   int
	stuck bool // does not die of signals: freezes at the first one
	// killpath: it set a kill program (KILLPATH with the pid argument);
	// restrict: its RESTRICT flags (wire.RestrictSigkill, RestrictSigterm).
	killpath bool
	restrict uint32
	frozen   bool  // stuck and signalled: does nothing more
	dead     bool  // exited or killed
	holds    []int // resources it holds, as the checker knows them
}

// killProgram is the kill program of the clients that set one; the
// simulator's RunKillpath (inst.runKillpath) plays it.
const killProgram = "/sim/killpath"

// newClient registers a new client process: one in four is stuck; one in
// four sets a kill program, one in eight RESTRICT_SIGKILL and one in eight
// RESTRICT_SIGTERM.
func (in *inst) newClient() *client {
	in.lastPid++
	c := &client{in: in, id: manager.ClientID(in.lastPid), pid: in.lastPid, stuck: in.rnd.IntN(4) == 0}
	switch in.rnd.IntN(8) {
	case 0, 1:
		c.killpath = true
	case 2:
		c.restrict = wire.RestrictSigkill
	case 3:
		c.restrict = wire.RestrictSigterm
	}
	in.clients[c.pid] = c
	st := manager.ClientStatus{Order: c.pid, Pid: c.pid, Registered: true, Name: strconv.Itoa(c.pid), Restrict: c.restrict}
	if c.killpath {
		st.KillPath, st.Flags = killProgram, wire.KillpathPID
	}
	in.m.Clients.Add(c.id, st)
	return c
}

// exit ends client c: its holds end now (the process is gone) and the
// manager is told, as the daemon does when the connection ends: its
// leases are released in the background, persistent ones become orphans.
func (in *inst) exit(c *client) {
	s := in.s
	for _, ri := range c.holds {
		s.check.released(c, ri)
	}
	c.holds = nil
	c.dead = true
	delete(in.clients, c.pid)
	in.m.Clients.Remove(c.id)
	in.m.Resources.ClientDead(c.id)
}

// orphan is a persistent lease whose client died: the host keeps it until
// a client adopts it or releases it (or the lockspace goes).
type orphan struct {
	ri     int
	shared bool
	lver   uint64
}

// lver returns the lver the manager reports for c's token on resource ri
// (inquire), and checks that c's lease list in the manager is what c
// believes it holds.
func (in *inst) lver(c *client, ri int) uint64 {
	s := in.s
	list, err := in.m.Resources.Inquire(c.id)
	if err != nil {
		s.check.fail("%s: inquire of pid %d failed: %v", in.name, c.pid, err)
		return 0
	}
	if len(list) != len(c.holds) {
		s.check.fail("%s: pid %d holds %d leases, the manager lists %d", in.name, c.pid, len(c.holds), len(list))
		return 0
	}
	for _, r := range list {
		if r.Name == s.names[ri] {
			return r.LVer
		}
	}
	s.check.fail("%s: pid %d holds %s, the manager does not list it", in.name, c.pid, s.names[ri])
	return 0
}

// worker is one client process at a time: after a random pause it takes a
// random resource (exclusive, or shared one time in five; OwnerNowait one
// time in three; persistent one time in eight), holds it 0–2 s (one time in
// twenty 2–30 s) and releases it, or exits holding it one time in twenty.
// Half of the time it finds an orphan of its host, it adopts it or
// releases it. A dead client is replaced by a new one.
func (in *inst) worker() {
	s := in.s
	if s.cfg.Contend {
		in.contender()
		return
	}
	name := s.running.name
	res := in.m.Resources
	c := in.newClient()
	for {
		in.sleep(in.uniform(0, time.Second))
		if c.frozen {
			s.block()
		}
		if c.dead {
			c = in.newClient()
		}
		var ri int
		var flags, cmd uint32
		var adopt uint64
		if len(in.orphans) > 0 && in.rnd.IntN(2) == 0 {
			o := in.orphans[0]
			in.orphans = in.orphans[1:]
			ri = o.ri
			if in.rnd.IntN(2) == 0 {
				s.counts.Releases++
				n, err := res.Release(in.ctx, c.id, manager.ReleaseRequest{Flags: wire.RelOrphan,
					Resources: []wire.Resource{s.resource(ri, 0)}})
				s.tracef(name, "pid %d release orphan %s: %d, %v", c.pid, s.names[ri], n, err)
				if err == nil {
					s.counts.ReleaseOK++
				}
				continue
			}
			flags, cmd, adopt = wire.ResPersistent, wire.AcquireOrphan, o.lver
			if o.shared {
				flags |= wire.ResShared
			}
		} else {
			ri = in.rnd.IntN(s.cfg.Resources)
			if in.busy[ri] > 0 && in.rnd.IntN(4) != 0 {
				continue // mostly leave another worker's resource alone
			}
			if in.rnd.IntN(5) == 0 {
				flags |= wire.ResShared
			}
			if in.rnd.IntN(3) == 0 {
				cmd |= wire.AcquireOwnerNowait
			}
			if in.rnd.IntN(8) == 0 {
				flags |= wire.ResPersistent
			}
		}
		shared := flags&wire.ResShared != 0
		s.tracef(name, "pid %d acquire %s %s flags %#x cmd %#x", c.pid, s.names[ri], mode(shared), flags, cmd)
		s.counts.Acquires++
		err := res.Acquire(in.ctx, c.id, manager.AcquireRequest{Resources: []wire.Resource{s.resource(ri, flags)}, Flags: cmd})
		if c.dead {
			s.tracef(name, "pid %d acquire %s ended after its death: %v", c.pid, s.names[ri], err)
			continue
		}
		if err != nil {
			s.tracef(name, "pid %d acquire %s failed: %v", c.pid, s.names[ri], err)
			if int32(rescode.CodeOf(err)) == rescode.RvENOSPC {
				in.sleep(time.Second) // the lockspace is failing or gone
			}
			continue
		}
		c.holds = append(c.holds, ri)
		in.busy[ri]++
		lver := in.lver(c, ri)
		s.counts.AcquireOK++
		s.tracef(name, "pid %d acquire %s %s ok lver %d", c.pid, s.names[ri], mode(shared), lver)
		s.check.acquired(c, ri, shared, lver, adopt)
		hold := in.uniform(0, 2*time.Second)
		if in.rnd.IntN(20) == 0 {
			hold = in.uniform(2*time.Second, 30*time.Second)
		}
		in.sleep(hold)
		if c.frozen {
			s.block() // killed in uninterruptible sleep: keeps the lease until the reset
		}
		in.busy[ri]--
		if c.dead {
			continue // killed by the escalation
		}
		if in.rnd.IntN(20) == 0 {
			s.counts.Exits++
			s.tracef(name, "pid %d exits holding %s", c.pid, s.names[ri])
			in.exit(c)
			if flags&wire.ResPersistent != 0 {
				in.orphans = append(in.orphans, orphan{ri: ri, shared: shared, lver: lver})
			}
			continue
		}
		s.check.released(c, ri)
		c.holds = nil
		s.counts.Releases++
		s.tracef(name, "pid %d release %s", c.pid, s.names[ri])
		if _, err := res.Release(in.ctx, c.id, manager.ReleaseRequest{Resources: []wire.Resource{s.resource(ri, 0)}}); err != nil {
			s.tracef(name, "pid %d release %s failed: %v", c.pid, s.names[ri], err)
		} else {
			s.counts.ReleaseOK++
		}
	}
}

// contender loops on R0 as a contending client of the bench does: non-blocking
// exclusive acquire, hold 0–20 ms, release, again at once; after a failure
// it retries 0–5 ms later.
func (in *inst) contender() {
	s := in.s
	name := s.running.name
	res := in.m.Resources
	c := in.newClient()
	r0 := s.resource(0, 0)
	for {
		if c.frozen {
			s.block()
		}
		if c.dead {
			c = in.newClient()
		}
		s.counts.Acquires++
		err := res.Acquire(in.ctx, c.id, manager.AcquireRequest{Resources: []wire.Resource{r0}, Flags: wire.AcquireOwnerNowait})
		if c.dead {
			continue
		}
		if err != nil {
			s.tracef(name, "acquire R0 failed: %v", err)
			in.sleep(in.uniform(0, 5*time.Millisecond) + time.Millisecond)
			continue
		}
		c.holds = append(c.holds, 0)
		lver := in.lver(c, 0)
		s.counts.AcquireOK++
		in.slot.acquired++
		s.tracef(name, "acquire R0 ok lver %d", lver)
		s.check.acquired(c, 0, false, lver, 0)
		in.sleep(in.uniform(0, 20*time.Millisecond))
		if c.frozen {
			s.block()
		}
		if c.dead {
			continue
		}
		s.check.released(c, 0)
		c.holds = nil
		s.counts.Releases++
		if _, err := res.Release(in.ctx, c.id, manager.ReleaseRequest{Resources: []wire.Resource{r0}}); err == nil {
			s.counts.ReleaseOK++
		}
	}
}

func (c *client) String() string { return fmt.Sprintf("%s/pid%d", c.in.name, c.pid) }
