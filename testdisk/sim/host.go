package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

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
	deadline := in.wdExp + uint64(c.W)
	return sl.trueAt(time.Duration(deadline)*time.Second) + c.LateWatchdog, true
}

// inst is one life of a host: from start to crash, reset or the end of
// its lockspace. It runs a real manager.Manager (lockspace registry,
// delta runner, main loop, kill escalation, resource table, per-client
// lease state) whose goroutines are tasks of the simulator.
type inst struct {
	s     *Sim
	slot  *slot
	name  string // h<id>.<life>
	tasks []*task
	rnd   *rand.Rand // workload choices; used only by this instance's tasks
	ctx   context.Context

	m       *manager.Manager
	px      *paxos.Host // our membership of the lockspace, once joined
	goN     int         // manager goroutines started
	armed   bool        // watchdog armed (delta lease acquired, not deactivated)
	wdLast  uint64      // last renewal the watchdog was told of (local seconds)
	wdExp   uint64      // the expiry it was told (local seconds)
	doomed  bool        // the escalation has started killing holders
	marked  bool        // the external agent has acted on this life (NoTimeout)
	dead    bool
	lastPid int
	clients map[int]*client // live clients by pid (looked up, never iterated)
	orphans []orphan        // persistent leases left by dead clients
	busy    []int           // per resource: workers of this life holding it
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

// Wait is Sleep that the scheduler also ends when wake has a value or ctx
// is done (wakeWaiters looks after every step, as for Setup.Await).
func (c hostClock) Wait(ctx context.Context, d time.Duration, wake <-chan struct{}) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	select {
	case <-wake:
		return true, nil
	default:
	}
	if d <= 0 {
		return false, nil
	}
	s := c.sl.s
	return s.waitUntil(ctx, c.sl.trueAt(c.Now()+d), wake), ctx.Err()
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

// ---- instances: see inst.go ----

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
