package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/testdisk"
)

// checker is the oracle. It knows true time and every host's state, and
// sees every acquire, release, host death and landed write as it happens:
//
//   - at most one exclusive holder per resource, and never a shared and an
//     exclusive holder together: a hold lasts from the moment Acquire
//     returns until Release is called, or until its host crashes or is
//     reset by its watchdog (true time);
//   - the lver of each exclusive acquisition is above every earlier one on
//     that resource (lvers are fencing tokens);
//   - an exclusive holder's lease is on disk as it believes: the leader
//     names it as owner with its lver;
//   - a lease is taken from a paused, partitioned or failing host only
//     after that host's watchdog reset (reported with the host's watchdog
//     deadline when broken);
//   - every sector a write lands is a record with a valid checksum.
//
// The first broken invariant stops the run.
type checker struct {
	s       *Sim
	holds   [][]hold // per resource
	maxLver []uint64
	err     error
	// fenced[ri] is the life the agent fenced while it held resource ri
	// exclusively (NoTimeout), until the next exclusive acquisition.
	fenced []*inst
}

type hold struct {
	c      *client
	in     *inst
	shared bool
	lver   uint64
	since  time.Duration
}

func newChecker(s *Sim) *checker {
	return &checker{s: s, holds: make([][]hold, s.cfg.Resources), maxLver: make([]uint64, s.cfg.Resources),
		fenced: make([]*inst, s.cfg.Resources)}
}

func (c *checker) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf(format, args...)
		c.s.tracef("check", "VIOLATION: %v", c.err)
	}
}

// step reports the first violation found so far.
func (c *checker) step() error { return c.err }

// state describes a host for a violation message: what the oracle knows
// about its faults and its watchdog deadline.
func (c *checker) state(in *inst) string {
	s := c.s
	sl := in.slot
	st := in.name
	if sl.pauseUntil > s.now {
		st += fmt.Sprintf(" paused until %v", sl.pauseUntil)
	}
	if sl.cutUntil > s.now {
		st += fmt.Sprintf(" partitioned until %v", sl.cutUntil)
	}
	if in.doomed {
		st += " in recovery"
	}
	if at, ok := sl.watchdogAt(); ok {
		st += fmt.Sprintf(", watchdog reset due at %v (now %v)", at, s.now)
	}
	return st
}

// acquired records that client cl holds resource ri from now on. adopt is
// the lver of the orphan cl adopted (0: none): an adoption continues that
// acquisition, so it may repeat its lver.
func (c *checker) acquired(cl *client, ri int, shared bool, lver, adopt uint64) {
	s := c.s
	in := cl.in
	nh := hold{c: cl, in: in, shared: shared, lver: lver, since: s.now}
	name := s.names[ri]
	for _, x := range c.holds[ri] {
		if !x.shared || !nh.shared {
			c.fail("%s: %s acquired %s (lver %d) while %s holds it %s (lver %d, since %v); holder: %s",
				name, cl, mode(nh.shared), nh.lver, x.c, mode(x.shared), x.lver, x.since, c.state(x.in))
		}
	}
	if !nh.shared {
		if f := c.fenced[ri]; f != nil {
			if f.slot.inst == nil {
				// taken from a fenced life that has not come back: only
				// its DEAD_EXT mark can have freed it
				s.counts.TakenAfterMark++
			}
			c.fenced[ri] = nil
		}
		if nh.lver <= c.maxLver[ri] && !(adopt != 0 && nh.lver == adopt && adopt == c.maxLver[ri]) {
			c.fail("%s: exclusive acquisition by %s with lver %d, not above the previous %d",
				name, cl, nh.lver, c.maxLver[ri])
		}
		c.maxLver[ri] = max(c.maxLver[ri], nh.lver)
		sec := make([]byte, s.geo.SectorSize)
		err := s.disk.Mem.ReadAt(context.Background(), sec, s.resOffset(ri))
		var ld diskfmt.Leader
		if err == nil {
			ld, err = diskfmt.DecodeLeader(sec)
		}
		if err != nil || ld.Lver != nh.lver || ld.OwnerID != in.slot.id || ld.OwnerGeneration != in.px.Generation || ld.Timestamp == 0 {
			c.fail("%s: %s holds lver %d but the leader on disk is lver %d owner %d/%d ts %d",
				name, cl, nh.lver, ld.Lver, ld.OwnerID, ld.OwnerGeneration, ld.Timestamp)
		}
	}
	c.holds[ri] = append(c.holds[ri], nh)
}

func mode(shared bool) string {
	if shared {
		return "shared"
	}
	return "exclusive"
}

// released ends cl's hold of resource ri (release called, or cl died).
func (c *checker) released(cl *client, ri int) {
	hs := c.holds[ri]
	for i, x := range hs {
		if x.c == cl {
			c.holds[ri] = append(hs[:i], hs[i+1:]...)
			return
		}
	}
	c.fail("%s released %s which it does not hold", cl, c.s.names[ri])
}

// left checks that a host whose lockspace has left (recovery done, no
// watchdog reset to come) has no holder left: the escalation must have
// ended them all first.
func (c *checker) left(in *inst) {
	if pids := in.m.Resources.SpaceHolders(space); len(pids) > 0 {
		c.fail("the lockspace of %s left while the manager lists holders %v", in.name, pids)
		return
	}
	for ri, hs := range c.holds {
		for _, x := range hs {
			if x.in == in {
				c.fail("%s: the lockspace of %s left while %s still holds it %s (lver %d, since %v); watchdog armed %v",
					c.s.names[ri], in.name, x.c, mode(x.shared), x.lver, x.since, in.armed)
				return
			}
		}
	}
}

// down ends every hold of a dead instance.
func (c *checker) down(in *inst) {
	for ri, hs := range c.holds {
		keep := hs[:0]
		for _, x := range hs {
			if x.in != in {
				keep = append(keep, x)
			} else {
				if in.marked && !x.shared {
					c.fenced[ri] = in
				}
				c.s.tracef("check", "%s's hold on %s ends with its host", in.name, c.s.names[ri])
			}
		}
		c.holds[ri] = keep
	}
}

// landed checks every sector of a write that reached the disk.
func (c *checker) landed(r *ioReq) {
	s := c.s
	ss := s.geo.SectorSize
	for i := 0; i*ss < len(r.buf); i++ {
		if r.o.Fault == testdisk.Torn && r.o.Land&(1<<min(i, 63)) == 0 {
			continue
		}
		off := r.op.Off + int64(i*ss)
		sec := r.buf[i*ss : (i+1)*ss]
		if err := c.verifySector(off, sec); err != nil {
			c.fail("write #%d by %s landed a bad record at offset %d: %v", r.op.Seq, r.t.name, off, err)
			return
		}
	}
}

func (c *checker) verifySector(off int64, sec []byte) error {
	s := c.s
	ss := int64(s.geo.SectorSize)
	area := off / int64(s.geo.AlignSize)
	n := (off % int64(s.geo.AlignSize)) / ss
	if area == 0 {
		if n >= int64(s.cfg.Hosts) {
			return fmt.Errorf("write beyond the delta leases (sector %d)", n)
		}
		_, err := diskfmt.VerifyDelta(sec, space)
		return err
	}
	ri := int(area - 1)
	switch {
	case ri >= s.cfg.Resources:
		return fmt.Errorf("write beyond the resources")
	case n == 0:
		_, err := diskfmt.VerifyPaxos(sec, space, s.names[ri], 0)
		return err
	case n == 1:
		_, err := diskfmt.DecodeRequest(sec)
		return err
	case n-1 <= int64(s.cfg.Hosts):
		allZero := true
		for _, b := range sec[:diskfmt.DblockSize] {
			if b != 0 {
				allZero = false
				break
			}
		}
		if allZero {
			return nil // a cleared host block
		}
		_, err := diskfmt.DecodeDblock(sec)
		return err
	case n == diskfmt.LVBSector:
		return nil
	}
	return fmt.Errorf("write to unused sector %d of %s", n, s.names[ri])
}
