// Package sim is a deterministic simulator for many hosts sharing one disk.
// Each simulated host runs the daemon's real lease manager
// (manager.Manager: lockspaces, delta runner, main loop, kill escalation,
// resource table, per-client leases, orphans) and through it the real
// delta and paxos algorithms, for simulated client processes, on a clock
// the simulator drives, against a testdisk.Disk whose faults come from one
// seeded random source. A
// scheduler decides, from the same seed, the order in which every disk
// call, timer and host fault takes effect; after every step an oracle that
// knows true time and every host's state checks mutual exclusion.
//
// # Execution model
//
// Every activity of a host (the manager's goroutines, started through
// manager.Setup.Go, and the client workers) is a task: a goroutine that only runs when the
// scheduler hands it control and that gives control back whenever it calls
// the disk or sleeps. Only one task runs at a time, so a run is a sequence
// of steps fixed by the seed: same seed, same trace, byte for byte.
//
// Time is the scheduler's true time. A host's clock is true time scaled by
// the host's rate (1, or slightly off for a drifting host) plus an offset of
// its own, so no two hosts agree on the time of day. A disk call takes
// effect (a read copies, a write lands) at one instant, the whole call
// atomically per sector, and its result reaches the caller then, or at the
// caller's I/O timeout if it hangs.
//
// # Faults
//
//   - disk calls: error before or after the data lands, hang until the
//     I/O timeout (a hung write lands before the timeout or never),
//     latency, torn multi-sector writes (testdisk.Injector);
//   - hosts: crash (and restart with a new generation), pause (the host's
//     tasks are frozen; its watchdog is not), partition (cut off from the
//     disk for a while), a clock that runs fast or slow.
//
// # Watchdog model
//
// A host's watchdog (docs/wdmd.md) is the manager's WatchdogSession: armed
// when its delta lease is acquired, told of every successful renewal (the
// daemon's test_live), disarmed once the escalation has ended every holder.
// Armed, it resets the host when the host's own clock reaches last success
// + id_renewal_fail_seconds + watchdog_fire_timeout. A signalled client
// dies (SIGKILL; SIGTERM one time in two) unless it is stuck, and then
// keeps its leases until the reset. A reset, like a crash, ends every hold
// of the host at that true time.
package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/paxos"
	"github.com/gosanlock/gosanlock/testdisk"
)

// Run simulates cfg and returns what happened. It panics on a cfg.Bugs
// that this build cannot run (no simbugs tag).
func Run(cfg Config) *Result {
	if cfg.Bugs != 0 && !paxos.BugsCompiled {
		// Without the tag the variants are not in the paxos code: the run
		// would test the correct algorithm under the variant's name.
		panic(fmt.Sprintf("sim: Config.Bugs %v needs a build with the simbugs tag (go test -tags simbugs ./testdisk/sim)", cfg.Bugs))
	}
	cfg.fill()
	s := newSim(cfg)
	s.run()
	return s.result()
}

// event kinds
type evKind uint8

const (
	evRun      evKind = iota // resume a task
	evLand                   // a disk call takes effect
	evTimeout                // a hung call's deadline
	evFault                  // the next host fault
	evRestart                // a crashed or reset host comes back
	evPauseEnd               // a pause ends
	evCutEnd                 // a partition ends
	evStop                   // an instance ends itself (join failed)
	evAgent                  // the external agent looks at the hosts (NoTimeout)
)

type event struct {
	at   time.Duration
	seq  uint64
	kind evKind
	t    *task
	io   *ioReq
	slot *slot
	in   *inst
}

// Sim is one run.
type Sim struct {
	cfg   Config
	rnd   *rand.Rand // scheduler and host faults
	now   time.Duration
	seq   uint64
	steps uint64
	evs   []*event // in seq order

	disk  *testdisk.Disk
	geo   diskfmt.Geometry
	slots []*slot
	hi    []int64  // per align-size area: end of its last non-zero sector
	names []string // resource names

	yield   chan *task
	running *task
	waiters []waiter // tasks waiting for a channel (Setup.Await)
	check   *checker
	trace   *trace
	counts  Counts
	drift   string
	violate error
}

const space = "SIM"

func newSim(cfg Config) *Sim {
	s := &Sim{cfg: cfg, yield: make(chan *task)}
	s.rnd = rand.New(rand.NewPCG(cfg.Seed, 0x5c4ed))
	s.trace = newTrace(cfg.TraceTail, cfg.KeepTrace)
	s.geo = diskfmt.Geometry{SectorSize: 4096, AlignSize: diskfmt.Align1M, MaxHosts: 250}
	mem := testdisk.NewMem(int64(1+cfg.Resources)*int64(s.geo.AlignSize), s.geo.SectorSize)
	area, commit, err := diskfmt.InitDeltaArea(diskfmt.DeltaInit{Geometry: s.geo, SpaceName: space, IOTimeout: uint16(cfg.IOTimeout)})
	if err != nil {
		panic(err)
	}
	if cfg.NoTimeout {
		markNoTimeout(area, s.geo, cfg.Hosts)
		markNoTimeout(commit, s.geo, 1)
	}
	mem.Load(area, 0)
	mem.Load(commit, 0)
	for i := 0; i < cfg.Resources; i++ {
		name := fmt.Sprintf("R%d", i)
		s.names = append(s.names, name)
		a, err := diskfmt.InitPaxosArea(diskfmt.PaxosInit{Geometry: s.geo, SpaceName: space, ResourceName: name, NumHosts: uint64(cfg.Hosts)})
		if err != nil {
			panic(err)
		}
		mem.Load(a, s.resOffset(i))
	}
	s.disk = testdisk.NewDisk(mem, cfg.Faults.Disk, cfg.Seed^0xd15c)
	s.initExtents()
	s.check = newChecker(s)
	drifter := -1
	var ppm int64
	if cfg.Faults.DriftPPM > 0 && s.rnd.Float64() < cfg.Faults.DriftP {
		drifter = s.rnd.IntN(cfg.Hosts)
		ppm = 1 + s.rnd.Int64N(cfg.Faults.DriftPPM)
		if s.rnd.IntN(2) == 0 {
			ppm = -ppm
		}
		s.drift = fmt.Sprintf("h%d %+dppm", drifter+1, ppm)
	}
	for i := 0; i < cfg.Hosts; i++ {
		sl := &slot{s: s, id: uint64(i + 1), idx: i,
			// every host has its own origin: clocks never agree
			base: time.Duration(1000+s.rnd.IntN(5000))*time.Second + time.Duration(s.rnd.Int64N(int64(time.Second))),
		}
		if i == drifter {
			sl.ppm = ppm
		}
		s.slots = append(s.slots, sl)
	}
	return s
}

func (s *Sim) resOffset(i int) int64 { return int64(1+i) * int64(s.geo.AlignSize) }

// commitsOther reports whether a write of b at off is a resource leader
// that names an owner other than its writer, not free.
func (s *Sim) commitsOther(b []byte, off int64) bool {
	a := int64(s.geo.AlignSize)
	if off%a != 0 || off/a < 1 || off/a > int64(s.cfg.Resources) {
		return false
	}
	ld, err := diskfmt.DecodeLeader(b)
	return err == nil && ld.Timestamp != 0 && ld.OwnerID != ld.WriteID
}

func (s *Sim) tracef(who string, format string, args ...any) {
	s.trace.add(s.now, who, format, args...)
}

// push schedules an event.
func (s *Sim) push(e *event) *event {
	s.seq++
	e.seq = s.seq
	s.evs = append(s.evs, e)
	return e
}

func (s *Sim) remove(e *event) {
	for i, x := range s.evs {
		if x == e {
			s.evs = append(s.evs[:i], s.evs[i+1:]...)
			return
		}
	}
}

// eff is when an event can happen: a task of a paused host resumes only
// after the pause.
func (s *Sim) eff(e *event) time.Duration {
	if (e.kind == evRun || e.kind == evTimeout) && e.t != nil {
		if p := e.t.in.slot.pauseUntil; p > e.at {
			return p
		}
	}
	return e.at
}

func (s *Sim) stopped() bool {
	c := &s.cfg
	return s.violate != nil || s.now >= c.Duration ||
		(c.MaxOps > 0 && s.counts.Ops() >= uint64(c.MaxOps)) ||
		(c.MaxSteps > 0 && s.steps >= c.MaxSteps)
}

func (s *Sim) run() {
	s.tracef("sim", "start seed=%d hosts=%d resources=%d workers=%d io=%d w=%d bugs=%v drift=%q faults=%v",
		s.cfg.Seed, s.cfg.Hosts, s.cfg.Resources, s.cfg.Workers, s.cfg.IOTimeout, s.cfg.W, s.cfg.Bugs, s.drift, s.cfg.Faults.Disk)
	for _, sl := range s.slots {
		s.startInstance(sl)
	}
	if s.cfg.Faults.HostEvery > 0 && s.cfg.Faults.Crash+s.cfg.Faults.Pause+s.cfg.Faults.Partition > 0 {
		s.push(&event{at: s.nextFaultTime(), kind: evFault})
	}
	if s.cfg.NoTimeout {
		s.push(&event{at: agentEvery, kind: evAgent})
	}
	ready := make([]*event, 0, 64)
	for !s.stopped() {
		// the earliest thing that can happen: an event or a watchdog
		next := time.Duration(math.MaxInt64)
		for _, e := range s.evs {
			next = min(next, s.eff(e))
		}
		for _, sl := range s.slots {
			if at, ok := sl.watchdogAt(); ok {
				next = min(next, at)
			}
		}
		if next == math.MaxInt64 {
			s.violate = errors.New("deadlock: nothing left to run")
			break
		}
		if next > s.now {
			s.now = next
			if s.now >= s.cfg.Duration {
				break
			}
		}
		s.steps++
		if s.fireWatchdogs() {
			s.afterStep()
			continue
		}
		ready = ready[:0]
		for _, e := range s.evs {
			if s.eff(e) <= s.now {
				ready = append(ready, e)
			}
		}
		e := ready[s.rnd.IntN(len(ready))]
		s.remove(e)
		s.exec(e)
		s.afterStep()
	}
	s.tracef("sim", "end ops=%d steps=%d", s.counts.Ops(), s.steps)
	s.shutdown()
}

func (s *Sim) afterStep() {
	s.wakeWaiters()
	if s.violate == nil {
		if err := s.check.step(); err != nil {
			s.violate = err
		}
	}
}

// fireWatchdogs resets every host whose watchdog deadline has come.
func (s *Sim) fireWatchdogs() bool {
	fired := false
	for _, sl := range s.slots {
		if at, ok := sl.watchdogAt(); ok && at <= s.now {
			in := sl.inst
			s.counts.Resets++
			s.tracef(in.name, "watchdog reset (last renewal %d, local deadline %d, doomed=%v)",
				in.wdLast, in.wdExp+uint64(s.cfg.W), in.doomed)
			s.killInstance(in, "reset")
			s.scheduleRestart(sl)
			fired = true
		}
	}
	return fired
}

func (s *Sim) exec(e *event) {
	switch e.kind {
	case evRun:
		s.resume(e.t)
	case evLand:
		s.land(e.io)
	case evTimeout:
		e.io.err = testdisk.TimeoutError(context.DeadlineExceeded)
		s.tracef(e.t.name, "%s #%d timed out", e.io.op.Kind, e.io.op.Seq)
		s.resume(e.t)
	case evFault:
		s.hostFault()
		s.push(&event{at: s.nextFaultTime(), kind: evFault})
	case evAgent:
		s.agent()
		s.push(&event{at: s.now + agentEvery, kind: evAgent})
	case evRestart:
		s.startInstance(e.slot)
	case evPauseEnd:
		s.tracef(e.slot.name(), "pause ends")
	case evCutEnd:
		s.disk.SetCut(e.slot.idx, false)
		s.tracef(e.slot.name(), "partition ends")
	case evStop:
		if e.in.slot.inst == e.in {
			s.killInstance(e.in, "stop")
			s.scheduleRestart(e.in.slot)
		}
	}
}

func (s *Sim) nextFaultTime() time.Duration {
	return s.now + time.Duration(s.rnd.ExpFloat64()*float64(s.cfg.Faults.HostEvery)).Round(time.Millisecond) + time.Millisecond
}

func (s *Sim) uniform(a, b time.Duration) time.Duration {
	if b <= a {
		return a
	}
	return (a + time.Duration(s.rnd.Int64N(int64(b-a)))).Round(time.Millisecond)
}

// hostFault injects one crash, pause or partition.
func (s *Sim) hostFault() {
	f := &s.cfg.Faults
	sl := s.slots[s.rnd.IntN(len(s.slots))]
	k := s.rnd.IntN(f.Crash + f.Pause + f.Partition)
	switch {
	case k < f.Crash:
		if sl.inst == nil {
			return
		}
		s.counts.Crashes++
		s.tracef(sl.inst.name, "CRASH")
		s.killInstance(sl.inst, "crash")
		s.scheduleRestart(sl)
	case k < f.Crash+f.Pause:
		if sl.pauseUntil > s.now {
			return
		}
		s.counts.Pauses++
		sl.pauseUntil = s.now + s.uniform(500*time.Millisecond, f.MaxOutage)
		s.tracef(sl.name(), "PAUSE until %v", sl.pauseUntil)
		s.push(&event{at: sl.pauseUntil, kind: evPauseEnd, slot: sl})
	default:
		if sl.cutUntil > s.now {
			return
		}
		s.counts.Partitions++
		sl.cutUntil = s.now + s.uniform(500*time.Millisecond, f.MaxOutage)
		s.disk.SetCut(sl.idx, true)
		s.tracef(sl.name(), "PARTITION until %v", sl.cutUntil)
		s.push(&event{at: sl.cutUntil, kind: evCutEnd, slot: sl})
	}
}

func (s *Sim) scheduleRestart(sl *slot) {
	s.push(&event{at: s.now + s.uniform(time.Second, 20*time.Second), kind: evRestart, slot: sl})
}

// shutdown ends every task.
func (s *Sim) shutdown() {
	for _, sl := range s.slots {
		if sl.inst != nil {
			s.killInstance(sl.inst, "end")
		}
	}
}

func (s *Sim) result() *Result {
	r := &Result{Config: s.cfg, Counts: s.counts, Drift: s.drift, Disk: s.disk.Stats(), SimTime: s.now,
		Steps: s.steps, Violation: s.violate, Trace: s.trace.lines(), Hash: s.trace.hash}
	for _, sl := range s.slots {
		r.Acquired = append(r.Acquired, sl.acquired)
	}
	return r
}

// ---- tasks ----
