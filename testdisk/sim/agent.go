package sim

import (
	"fmt"
	"time"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/wire"
)

// agentEvery is how often the external agent of a NoTimeout run looks at
// the hosts.
const agentEvery = 5 * time.Second

// markNoTimeout sets the NO_TIMEOUT leader flag in the delta leases of
// host_ids 1..hosts of an initialised lockspace area (as 5.1.1's
// `init_host -N 1` leaves them).
func markNoTimeout(area []byte, g diskfmt.Geometry, hosts int) {
	ss := g.SectorSize
	for h := 0; h < hosts && (h+1)*ss <= len(area); h++ {
		sec := area[h*ss : (h+1)*ss]
		l, err := diskfmt.DecodeLeader(sec)
		if err != nil {
			panic(err)
		}
		l.Flags |= diskfmt.LeaderNoTimeout
		l.Seal(sec)
	}
}

// agent is the external agent of a NO_TIMEOUT lockspace (lvmlockd with
// SCSI persistent reservations, in 5.1.1's design): nothing bounds a host
// that stops renewing, so the agent fences it (in the model: its life ends
// at once, every write in flight landing now or never, exactly a crash)
// and only then declares it dead with set_host DEAD_EXT naming that life's
// generation, through another joined host. It looks every agentEvery at
// the hosts in trouble (paused, partitioned, or whose escalation started)
// and acts on each one time in two, so some troubles also end by
// themselves. With AgentEarly (the broken variant) it marks the host
// without fencing it.
func (s *Sim) agent() {
	for _, sl := range s.slots {
		in := sl.inst
		if in == nil || in.px == nil || in.marked {
			continue
		}
		if sl.pauseUntil <= s.now && sl.cutUntil <= s.now && !in.doomed {
			continue
		}
		if s.rnd.IntN(2) == 0 {
			continue
		}
		var helper *inst
		for _, o := range s.slots {
			if o != sl && o.inst != nil && o.inst.px != nil && o.pauseUntil <= s.now && o.cutUntil <= s.now {
				helper = o.inst
				break
			}
		}
		if helper == nil {
			continue
		}
		gen := in.px.Generation
		in.marked = true
		if !s.cfg.AgentEarly {
			s.counts.Fenced++
			s.tracef(in.name, "FENCED by the agent")
			s.killInstance(in, "fenced")
			// back after 20-40 s (a fenced host is restored by hand):
			// its leases are freed by the mark, not by its new generation
			s.push(&event{at: s.now + s.uniform(20*time.Second, 40*time.Second), kind: evRestart, slot: sl})
		}
		target := wire.Host{HostID: sl.id, Generation: gen}
		s.spawn(helper, fmt.Sprintf("%s/agent", helper.name), func() {
			err := helper.m.Lockspaces.SetHost(helper.ctx, s.lockspace(helper.slot), manager.SetHostDeadExt, target)
			s.tracef(helper.name, "set_host DEAD_EXT host %d generation %d: %v", target.HostID, target.Generation, err)
			if err == nil {
				s.counts.Marked++
			}
		})
		return
	}
}
