package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/paxos"
	"github.com/gosanlock/gosanlock/testdisk"
)

// slot is one host_id across its restarts: its clock, its pauses and
// partitions, and the running instance (nil while down).
type slot struct {
	s          *Sim
	id         uint64
	idx        int
	base       time.Duration // local clock at true time 0
	ppm        int64         // clock rate error, parts per million
	pauseUntil time.Duration
	cutUntil   time.Duration
	inst       *inst
	starts     int
	acquired   uint64 // exclusive acquisitions, all lives
}

func (sl *slot) name() string { return fmt.Sprintf("h%d", sl.id) }

// local is the host's clock reading at true time t.
func (sl *slot) local(t time.Duration) time.Duration {
	d := int64(t)
	return sl.base + t + time.Duration(d/1_000_000*sl.ppm+d%1_000_000*sl.ppm/1_000_000)
}

// trueAt is the earliest true time at which the host's clock reads at
// least l.
func (sl *slot) trueAt(l time.Duration) time.Duration {
	t := time.Duration(float64(l-sl.base) / (1 + float64(sl.ppm)/1e6))
	for sl.local(t) < l {
		t++
	}
	for t > 0 && sl.local(t-1) >= l {
		t--
	}
	return t
}

// watchdogAt is the true time at which the watchdog resets the running
// instance, if armed.
func (sl *slot) watchdogAt() (time.Duration, bool) {
	in := sl.inst
	if in == nil || !in.armed {
		return 0, false
	}
	c := sl.s.cfg
	deadline := in.wdLast + uint64(8*c.IOTimeout+c.W)
	return sl.trueAt(time.Duration(deadline)*time.Second) + c.LateWatchdog, true
}

// inst is one life of a host: from start to crash or reset.
type inst struct {
	s     *Sim
	slot  *slot
	name  string // h<id>.<life>
	tasks []*task
	rnd   *rand.Rand // workload choices; used only by this instance's tasks
	ctx   context.Context

	ls      *delta.Lockspace
	px      *paxos.Host
	started bool
	armed   bool   // watchdog armed (delta lease acquired)
	wdLast  uint64 // last renewal the watchdog was told of (local seconds)
	doomed  bool   // own-lease check failed: recovery, watchdog no longer fed
	dead    bool
	busy    []bool // per resource: a worker of this instance is on it
}

// hostClock is a host's clock.Clock.
type hostClock struct{ sl *slot }

func (c hostClock) Now() time.Duration { return c.sl.local(c.sl.s.now) }

func (c hostClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	s := c.sl.s
	s.sleepUntil(c.sl.trueAt(c.Now() + d))
	return ctx.Err()
}

// hostPort is a host's view of the disk. Each call is decided by the
// disk's injector, then scheduled: it takes effect after its latency, or
// times out at the caller's deadline.
type hostPort struct{ sl *slot }

var _ diskfmt.Device = hostPort{}

func (p hostPort) SectorSize() int { return p.sl.s.geo.SectorSize }
func (p hostPort) Close() error    { return nil }

func (p hostPort) ReadAt(ctx context.Context, b []byte, off int64) error {
	return p.sl.s.io(ctx, testdisk.OpRead, b, off)
}

func (p hostPort) WriteAt(ctx context.Context, b []byte, off int64) error {
	return p.sl.s.io(ctx, testdisk.OpWrite, b, off)
}

// ioReq is one disk call in flight.
type ioReq struct {
	t   *task
	op  testdisk.Op
	o   testdisk.Outcome
	buf []byte // the caller's buffer (read) or a copy of the data (write)
	dst []byte // the caller's buffer for a read
	err error
	ev  *event // pending land event
}

// timeoutOf is the caller's I/O timeout in simulated time. The deadline in
// ctx is on package time; it only tells which of the two timeouts the
// caller chose: io_timeout, or host_dead_seconds for the renewal write.
func (s *Sim) timeoutOf(ctx context.Context) time.Duration {
	io := time.Duration(s.cfg.IOTimeout) * time.Second
	dead := time.Duration(8*s.cfg.IOTimeout+s.cfg.W) * time.Second
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) > (io+dead)/2 {
		return dead
	}
	return io
}

func (s *Sim) io(ctx context.Context, kind testdisk.OpKind, b []byte, off int64) error {
	t := s.running
	sl := t.in.slot
	if p := s.cfg.Faults.LateLeader; p > 0 && kind == testdisk.OpWrite && s.commitsOther(b, off) && s.rnd.Float64() < p {
		d := s.uniform(500*time.Millisecond, s.cfg.Faults.LateLeaderMax)
		s.counts.LateLeaders++
		s.tracef(t.name, "STALL %v before the leader write at off=%d", d, off)
		s.sleepUntil(s.now + d)
	}
	op, o := s.disk.Decide(kind, sl.idx, off, len(b))
	r := &ioReq{t: t, op: op, o: o}
	if kind == testdisk.OpWrite {
		r.buf = append([]byte(nil), b...)
	} else {
		r.dst = b // filled when the read takes effect; the caller waits until then
	}
	timeout := s.timeoutOf(ctx)
	s.tracef(t.name, "%s #%d off=%d len=%d %v", kind, op.Seq, off, len(b), o)
	if o.Fault == testdisk.Hang || o.Latency >= timeout {
		if o.Fault != testdisk.Hang {
			// too slow: the caller gives up; the write may still land first
			r.o.Fault, r.o.Land = testdisk.Hang, 0
			if kind == testdisk.OpWrite && s.rnd.IntN(2) == 0 {
				r.o.Land = 1
			}
		}
		if kind == testdisk.OpWrite && r.o.Land != 0 {
			r.ev = s.push(&event{at: s.now + s.uniform(0, timeout), kind: evLand, io: r})
		}
		s.push(&event{at: s.now + timeout, kind: evTimeout, t: t, io: r})
		t.park()
		return r.err
	}
	r.ev = s.push(&event{at: s.now + o.Latency, kind: evLand, io: r})
	t.park()
	return r.err
}

// land applies a call's data effect; for a call that is not hung it then
// resumes the caller (at once, or when its pause ends).
func (s *Sim) land(r *ioReq) {
	r.ev = nil
	var err error
	if r.op.Kind == testdisk.OpRead {
		err = s.read(r)
	} else {
		err = s.disk.Apply(r.op, r.o, r.buf)
		if r.o.Fault != testdisk.ErrBefore {
			s.landed(r)
		}
	}
	if r.o.Fault == testdisk.Hang {
		s.tracef(r.t.name, "write #%d landed (caller will time out)", r.op.Seq)
		return
	}
	r.err = err
	if err != nil {
		s.tracef(r.t.name, "%s #%d failed: %v", r.op.Kind, r.op.Seq, err)
	}
	if r.t.in.slot.pauseUntil > s.now {
		s.push(&event{at: s.now, kind: evRun, t: r.t})
		return
	}
	s.resume(r.t)
}

// ---- instances ----

func (s *Sim) startInstance(sl *slot) {
	sl.starts++
	in := &inst{s: s, slot: sl, name: fmt.Sprintf("h%d.%d", sl.id, sl.starts), ctx: context.Background(),
		rnd:  rand.New(rand.NewPCG(s.cfg.Seed, sl.id<<32|uint64(sl.starts))),
		busy: make([]bool, s.cfg.Resources)}
	sl.inst = in
	if sl.starts > 1 {
		s.counts.Restarts++
	}
	s.tracef(in.name, "start (local clock %v)", hostClock{sl}.Now())
	ls, err := delta.New(delta.Config{
		Dev: hostPort{sl}, Space: space, HostID: sl.id, HostName: fmt.Sprintf("host%d", sl.id),
		Geometry: s.geo, IOTimeout: s.cfg.IOTimeout, WatchdogFireTimeout: s.cfg.W,
		HistorySize: -1, Clock: hostClock{sl},
		OnAcquired: func(_ context.Context, ts uint64) error {
			in.armed, in.wdLast = true, ts
			s.tracef(in.name, "delta lease acquired ts=%d", ts)
			return nil
		},
		OnRenewed: func(ts uint64) {
			if !in.doomed {
				in.wdLast = ts
			}
		},
	})
	if err != nil {
		panic(err)
	}
	in.ls = ls
	s.spawn(in, in.name+"/ls", func() {
		err := ls.Run(in.ctx)
		s.tracef(in.name, "lockspace runner ended: %v", err)
	})
	s.spawn(in, in.name+"/main", in.mainLoop)
}

// killInstance ends a host's life at the current time (crash, watchdog
// reset or end of run): its holds end, its tasks die, and each of its
// writes in flight lands now or never.
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

// mainLoop is the daemon's main loop: every second, the own-lease check
// and the processing of the latest renewal read; it starts the workers
// once the lockspace is joined.
func (in *inst) mainLoop() {
	s := in.s
	for {
		in.sleep(time.Second)
		st := in.ls.Status()
		if st.Stopped && !st.Joined {
			s.tracef(in.name, "join failed: %v", st.AcquireLastResult)
			s.push(&event{at: s.now, kind: evStop, in: in})
			return
		}
		if !st.Joined {
			continue
		}
		if !in.started {
			in.started = true
			in.px = &paxos.Host{
				ID: in.slot.id, Generation: st.HostGeneration, Space: space, Geometry: s.geo,
				IOTimeout: s.cfg.IOTimeout, WatchdogFireTimeout: s.cfg.W, ShRetries: paxos.DefaultShRetries,
				Clock: hostClock{in.slot}, Live: manager.Liveness(in.ls),
				Rand:     rand.New(rand.NewPCG(s.cfg.Seed^0xba110, in.slot.id<<32|st.HostGeneration)),
				TestBugs: s.cfg.Bugs, ContendedWait: s.cfg.ContendedWait,
			}
			s.tracef(in.name, "joined generation %d", st.HostGeneration)
			for w := 0; w < s.cfg.Workers; w++ {
				s.spawn(in, fmt.Sprintf("%s/w%d", in.name, w), in.worker)
			}
		}
		if !in.doomed {
			if state, gap := in.ls.CheckOwnLease(); state.Failed() {
				in.doomed = true
				s.counts.Doomed++
				s.tracef(in.name, "own lease check %v (gap %d): recovery, watchdog deadline %d", state, gap,
					in.wdLast+uint64(8*s.cfg.IOTimeout+s.cfg.W))
			}
		}
		in.ls.ProcessHosts()
	}
}

// worker acquires and releases random resources, exclusive or shared.
func (in *inst) worker() {
	s := in.s
	if s.cfg.Contend {
		in.contender()
		return
	}
	name := s.running.name
	for {
		in.sleep(in.uniform(0, time.Second))
		if in.doomed {
			s.block()
		}
		ri := in.rnd.IntN(s.cfg.Resources)
		if in.busy[ri] {
			continue
		}
		in.busy[ri] = true
		req := paxos.AcquireRequest{Shared: in.rnd.IntN(5) == 0, OwnerNowait: in.rnd.IntN(3) == 0}
		lease := &paxos.Lease{Host: in.px, Name: s.names[ri], Disks: []paxos.Disk{{Dev: hostPort{in.slot}, Offset: s.resOffset(ri)}}}
		mode := "ex"
		if req.Shared {
			mode = "sh"
		}
		s.tracef(name, "acquire %s %s nowait=%v", s.names[ri], mode, req.OwnerNowait)
		s.counts.Acquires++
		held, err := lease.Acquire(in.ctx, req)
		if err != nil {
			s.tracef(name, "acquire %s %s failed: %v", s.names[ri], mode, err)
			in.busy[ri] = false
			continue
		}
		s.counts.AcquireOK++
		s.tracef(name, "acquire %s %s ok lver %d", s.names[ri], mode, held.Leader.Lver)
		s.check.acquired(in, ri, held)
		hold := in.uniform(0, 2*time.Second)
		if in.rnd.IntN(20) == 0 {
			hold = in.uniform(2*time.Second, 30*time.Second)
		}
		in.sleep(hold)
		if in.doomed {
			s.block() // the holder cannot be killed; it keeps the lease until the reset
		}
		s.check.released(in, ri)
		s.counts.Releases++
		s.tracef(name, "release %s", s.names[ri])
		if err := held.Release(in.ctx, paxos.ReleaseOptions{}); err != nil {
			s.tracef(name, "release %s failed: %v", s.names[ri], err)
		} else {
			s.counts.ReleaseOK++
		}
		in.busy[ri] = false
	}
}

// read performs a read's effect. Most of each 1 MiB area is zeros that are
// never written (the checker fails any write outside the records), so only
// the part up to the area's last written sector is copied and the rest of
// the caller's buffer is cleared: same result, much less copying.
func (s *Sim) read(r *ioReq) error {
	align := int64(s.geo.AlignSize)
	area, rel := r.op.Off/align, r.op.Off%align
	if int(area) >= len(s.hi) || rel+int64(r.op.Len) > align || r.o.Fault == testdisk.ErrBefore {
		return s.disk.Apply(r.op, r.o, r.dst)
	}
	n := min(max(s.hi[area]-rel, 0), int64(r.op.Len))
	clear(r.dst[n:])
	if n == 0 {
		return nil
	}
	return s.disk.Apply(r.op, r.o, r.dst[:n])
}

// landed records how far into its area a write reached and lets the
// checker look at it.
func (s *Sim) landed(r *ioReq) {
	align := int64(s.geo.AlignSize)
	end := r.op.Off + int64(len(r.buf))
	for a := r.op.Off / align; a < int64(len(s.hi)) && a*align < end; a++ {
		s.hi[a] = max(s.hi[a], min(end-a*align, align))
	}
	s.check.landed(r)
}

// initExtents finds the last non-zero sector of every area.
func (s *Sim) initExtents() {
	b := s.disk.Mem.Bytes()
	align, ss := s.geo.AlignSize, s.geo.SectorSize
	s.hi = make([]int64, len(b)/align)
	for a := range s.hi {
		for off := align - ss; off >= 0; off -= ss {
			if !allZero(b[a*align+off : a*align+off+ss]) {
				s.hi[a] = int64(off + ss)
				break
			}
		}
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// contender loops on R0 as a client of issue 18 does: non-blocking
// exclusive acquire, hold 0–20 ms, release, again at once; after a failure
// it retries 0–5 ms later.
func (in *inst) contender() {
	s := in.s
	name := s.running.name
	lease := &paxos.Lease{Host: in.px, Name: s.names[0], Disks: []paxos.Disk{{Dev: hostPort{in.slot}, Offset: s.resOffset(0)}}}
	for {
		if in.doomed {
			s.block()
		}
		if in.busy[0] {
			in.sleep(in.uniform(0, 5*time.Millisecond) + time.Millisecond)
			continue
		}
		in.busy[0] = true
		s.counts.Acquires++
		held, err := lease.Acquire(in.ctx, paxos.AcquireRequest{OwnerNowait: true})
		if err != nil {
			in.busy[0] = false
			s.tracef(name, "acquire R0 failed: %v", err)
			in.sleep(in.uniform(0, 5*time.Millisecond) + time.Millisecond)
			continue
		}
		s.counts.AcquireOK++
		in.slot.acquired++
		s.tracef(name, "acquire R0 ok lver %d", held.Leader.Lver)
		s.check.acquired(in, 0, held)
		in.sleep(in.uniform(0, 20*time.Millisecond))
		if in.doomed {
			s.block()
		}
		s.check.released(in, 0)
		s.counts.Releases++
		if err := held.Release(in.ctx, paxos.ReleaseOptions{}); err == nil {
			s.counts.ReleaseOK++
		}
		in.busy[0] = false
	}
}
