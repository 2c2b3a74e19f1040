package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/testdisk"
	"github.com/gosanlock/gosanlock/wire"
)

// diskPath is the path of the shared disk as the managers see it. Every
// open returns the host's port (hostPort); the manager's release checks
// that the path names a file, so it is one that always exists.
const diskPath = "/"

// killGrace is the kill_grace_seconds of every simulated host: SIGTERM (or
// nothing more for a client with a kill program) from the failure deadline
// L+8N, SIGKILL from L+8N+killGrace, the watchdog at L+8N+W.
const killGrace = 3

func (s *Sim) lockspace(sl *slot) wire.Lockspace {
	return wire.Lockspace{Name: space, HostID: sl.id, Disk: wire.Disk{Path: diskPath}}
}

func (s *Sim) resource(ri int, flags uint32) wire.Resource {
	return wire.Resource{LockspaceName: space, Name: s.names[ri], Flags: flags,
		Disks: []wire.Disk{{Path: diskPath, Offset: uint64(s.resOffset(ri))}}}
}

// startInstance starts a new life of a host: a new manager, started with
// the simulator's clock, disk, watchdog, kill and goroutine hooks, and its
// main task, which adds the lockspace.
func (s *Sim) startInstance(sl *slot) {
	sl.starts++
	in := &inst{s: s, slot: sl, name: fmt.Sprintf("h%d.%d", sl.id, sl.starts), ctx: context.Background(),
		rnd:     rand.New(rand.NewPCG(s.cfg.Seed, sl.id<<32|uint64(sl.starts))),
		clients: map[int]*client{}, busy: make([]int, s.cfg.Resources)}
	sl.inst = in
	if sl.starts > 1 {
		s.counts.Restarts++
	}
	s.tracef(in.name, "start (local clock %v)", hostClock{sl}.Now())
	open := func(string) (diskfmt.Device, error) { return hostPort{sl}, nil }
	in.m = manager.New(manager.Setup{
		Clock: hostClock{sl}, Open: open, Kill: in.kill,
		RunKillpath: in.runKillpath, CheckInterval: s.cfg.CheckInterval,
		OpenWatchdog: func(string, uint64) (manager.WatchdogSession, error) { return simWatchdog{in}, nil },
		Context:      in.ctx, HostName: fmt.Sprintf("host%d", sl.id),
		Settings: manager.Settings{UseWatchdog: true, WatchdogFireTimeout: s.cfg.W, KillGraceSeconds: killGrace},
		Go: func(fn func()) {
			in.goN++
			s.spawn(in, fmt.Sprintf("%s/g%d", in.name, in.goN), fn)
		},
		Await: s.await,
	})
	s.spawn(in, in.name+"/main", in.mainLoop)
}

// killInstance ends a host's life at the current time (crash, watchdog
// reset, end of its lockspace or of the run): its holds end, its tasks
// die, and each of its writes in flight lands now or never.
func (s *Sim) killInstance(in *inst, why string) {
	if in.dead {
		return
	}
	in.dead = true
	s.check.down(in)
	keep := s.evs[:0]
	var lands []*ioReq
	for _, e := range s.evs {
		switch {
		case e.t != nil && e.t.in == in:
			// its tasks' resumptions and timeouts go
		case e.kind == evLand && e.io.t.in == in:
			lands = append(lands, e.io)
		case e.kind == evStop && e.in == in:
		default:
			keep = append(keep, e)
		}
	}
	s.evs = keep
	ws := s.waiters[:0]
	for _, w := range s.waiters {
		if w.t.in != in {
			ws = append(ws, w)
		}
	}
	s.waiters = ws
	for _, r := range lands {
		if r.op.Kind == testdisk.OpWrite && s.rnd.IntN(2) == 0 {
			r.o.Fault = testdisk.NoFault
			s.disk.Apply(r.op, r.o, r.buf)
			s.landed(r)
			s.tracef(in.name, "in-flight write #%d lands at %s", r.op.Seq, why)
		}
	}
	for _, t := range in.tasks {
		s.kill(t)
	}
	if in.slot.inst == in {
		in.slot.inst = nil
	}
	s.tracef(in.name, "down (%s)", why)
}

func (in *inst) sleep(d time.Duration) {
	hostClock{in.slot}.Sleep(in.ctx, d)
}

func (in *inst) uniform(a, b time.Duration) time.Duration {
	if b <= a {
		return a
	}
	return (a + time.Duration(in.rnd.Int64N(int64(b-a)))).Round(time.Millisecond)
}

// mainLoop adds the lockspace (asynchronously, as a client of the daemon
// would), looks every second whether it is joined, sets up the workers
// once it is, and ends the life when the lockspace is gone: its add
// failed, or the manager's recovery killed every holder and removed it.
func (in *inst) mainLoop() {
	s := in.s
	ls := s.lockspace(in.slot)
	if err := in.m.Lockspaces.Add(in.ctx, manager.AddRequest{Lockspace: ls, Async: true, IOTimeout: uint32(s.cfg.IOTimeout)}); err != nil {
		panic(fmt.Sprintf("add_lockspace: %v", err))
	}
	joined := false
	for {
		in.sleep(time.Second)
		err := in.m.Lockspaces.Inq(in.ctx, manager.InqRequest{Lockspace: ls})
		switch {
		case err == nil && !joined:
			joined = true
			px, err := in.m.Lockspaces.PaxosHost(space)
			if err != nil {
				continue // already failing: it leaves soon
			}
			// The manager built our paxos.Host; nothing used it yet.
			px.TestBugs, px.Fairness.ContendedWait = s.cfg.Bugs, s.cfg.ContendedWait
			px.Rand = rand.New(rand.NewPCG(s.cfg.Seed^0xba110, in.slot.id<<32|px.Generation))
			if s.cfg.TuneHost != nil {
				s.cfg.TuneHost(px)
			}
			in.px = px
			s.tracef(in.name, "joined generation %d", px.Generation)
			for w := 0; w < s.cfg.Workers; w++ {
				s.spawn(in, fmt.Sprintf("%s/w%d", in.name, w), in.worker)
			}
		case err == nil, int32(rescode.CodeOf(err)) == rescode.RvEINPROGRESS:
		default:
			if joined {
				s.tracef(in.name, "lockspace left: %v", err)
				s.check.left(in)
			} else {
				s.tracef(in.name, "join failed: %v", err)
			}
			s.push(&event{at: s.now, kind: evStop, in: in})
			return
		}
	}
}

// simWatchdog is the wdmd connection of a host's lockspace: it arms,
// feeds and disarms the simulator's watchdog model (slot.watchdogAt).
type simWatchdog struct{ in *inst }

func (w simWatchdog) Activate(renewal, expire uint64) error {
	if w.in.s.cfg.NoTimeout {
		return nil // NO_TIMEOUT hosts run without a watchdog
	}
	in := w.in
	in.armed, in.wdLast, in.wdExp = true, renewal, expire
	in.s.tracef(in.name, "watchdog armed renewal=%d expire=%d", renewal, expire)
	return nil
}

func (w simWatchdog) Renewed(ts, expire uint64) error {
	w.in.wdLast, w.in.wdExp = ts, expire
	return nil
}

// Handover refuses: the simulator hands no lockspace over.
func (w simWatchdog) Handover() (*os.File, string, bool, error) {
	return nil, "", false, errors.New("a simulated watchdog cannot be handed over")
}

func (w simWatchdog) Deactivate() error {
	in := w.in
	in.armed = false
	in.s.tracef(in.name, "watchdog deactivated (all holders gone)")
	return nil
}

func (simWatchdog) Close() error { return nil }

// kill is the manager's kill(2): it delivers the escalation's signal to a
// simulated client. A client that is not stuck dies of SIGKILL, and of
// SIGTERM one time in two; a stuck client (a process in uninterruptible
// sleep) freezes at the first signal and keeps its leases until its host
// is reset.
func (in *inst) kill(pid int, sig syscall.Signal) error {
	c := in.clients[pid]
	if c == nil {
		return syscall.ESRCH
	}
	in.signal(c, fmt.Sprintf("sig %d", sig), sig == syscall.SIGKILL)
	return nil
}

// signal delivers a signal or a kill program's action to c: a stuck client
// freezes, others die (certainly when sure, else one time in two).
func (in *inst) signal(c *client, what string, sure bool) {
	s := in.s
	if !in.doomed {
		in.doomed = true
		s.counts.Doomed++
	}
	s.counts.Kills++
	switch {
	case c.stuck:
		c.frozen = true
		s.tracef(in.name, "kill pid %d %s: stuck, holds %v", c.pid, what, c.holds)
	case sure || in.rnd.IntN(2) == 0:
		s.tracef(in.name, "kill pid %d %s: dies", c.pid, what)
		in.exit(c)
	default:
		s.tracef(in.name, "kill pid %d %s: survives", c.pid, what)
	}
}

// runKillpath is the manager's RunKillpath: the kill program of a client
// that set one (with its pid as last argument) ends it one time in two.
func (in *inst) runKillpath(argv []string) error {
	if len(argv) != 2 || argv[0] != killProgram {
		in.s.check.fail("%s: kill program run as %q", in.name, argv)
		return nil
	}
	pid, err := strconv.Atoi(argv[1])
	if c := in.clients[pid]; err == nil && c != nil {
		in.signal(c, "killpath", false)
	}
	return nil
}
