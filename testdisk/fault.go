package testdisk

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

// This file is shared storage that fails on purpose. A Disk is one Mem
// reached by many hosts through their own Port. Before each call it asks an
// Injector what happens to that call; every decision draws from one seeded
// random source, so a seed replays the same faults for the same sequence of
// calls. The decision (Disk.Decide) and the data effect (Disk.Apply) are
// separate steps so that a simulator can put time between them; Port is
// the plain driver that runs both on package time (and so on fake time
// inside a testing/synctest bubble).

// ErrInjected is the error an injected failure returns (an EIO).
var ErrInjected = fmt.Errorf("testdisk: injected fault: %w", syscall.EIO)

// OpKind is read or write.
type OpKind uint8

// Operation kinds.
const (
	OpRead OpKind = iota
	OpWrite
)

func (k OpKind) String() string {
	if k == OpWrite {
		return "write"
	}
	return "read"
}

// Op is one device call as an injector sees it.
type Op struct {
	Kind    OpKind
	Host    int   // the caller's host number (Port's)
	Off     int64 // byte offset on the device
	Len     int   // bytes
	Sectors int   // Len in sectors
	Seq     uint64
}

// Fault is what goes wrong with one call.
type Fault uint8

// Faults. A single-sector write is atomic: it lands whole or not at all.
const (
	// NoFault: the call completes (after its latency).
	NoFault Fault = iota
	// ErrBefore: the call fails and nothing is read or written.
	ErrBefore
	// ErrAfter: the call takes effect (a write lands), then fails.
	ErrAfter
	// Hang: the call never completes; the caller sees its I/O timeout. A
	// hung write may have landed before the timeout (Outcome.Land).
	Hang
	// Torn: a multi-sector write lands only on the sectors in
	// Outcome.Land, then fails.
	Torn
)

var faultNames = [...]string{"ok", "err-before", "err-after", "hang", "torn"}

func (f Fault) String() string {
	if int(f) < len(faultNames) {
		return faultNames[f]
	}
	return "fault(" + strconv.Itoa(int(f)) + ")"
}

// Outcome is the decision for one call.
type Outcome struct {
	Fault   Fault
	Latency time.Duration // time before the call takes effect
	// Land: for Torn, bit i set means sector i of the write lands (sectors
	// past 63 follow bit 63); for Hang, non-zero means the write lands
	// before the timeout.
	Land uint64
}

func (o Outcome) String() string {
	s := o.Fault.String()
	if o.Latency != 0 {
		s += "+" + o.Latency.String()
	}
	if o.Fault == Torn || (o.Fault == Hang && o.Land != 0) {
		s += fmt.Sprintf(" land=%#x", o.Land)
	}
	return s
}

// Injector decides faults. Inject may change o: set a fault (only if none is
// set yet) and add latency. It must draw randomness only from r, and must be
// deterministic given op and r.
type Injector interface {
	Inject(op Op, r *rand.Rand, o *Outcome)
	String() string
}

// Chain applies injectors in order: the first fault set wins, latencies add.
type Chain []Injector

// Inject implements Injector.
func (c Chain) Inject(op Op, r *rand.Rand, o *Outcome) {
	for _, i := range c {
		i.Inject(op, r, o)
	}
}

func (c Chain) String() string {
	parts := make([]string, len(c))
	for i, inj := range c {
		parts[i] = inj.String()
	}
	return strings.Join(parts, ",")
}

// probFault sets fault f with probability p.
type probFault struct {
	name string
	f    Fault
	p    float64
}

func (i probFault) Inject(op Op, r *rand.Rand, o *Outcome) {
	if i.p <= 0 || r.Float64() >= i.p || o.Fault != NoFault {
		return
	}
	o.Fault = i.f
	switch i.f {
	case Hang:
		if op.Kind == OpWrite && r.IntN(2) == 0 {
			o.Land = 1
		}
	case ErrAfter:
		if op.Kind == OpRead {
			// a read has no effect to land; fail it like ErrBefore
			o.Fault = ErrBefore
		}
	}
}

func (i probFault) String() string { return i.name + ":" + fmtFloat(i.p) }

// ErrorBefore fails a call with probability p before it takes effect.
func ErrorBefore(p float64) Injector { return probFault{"err-before", ErrBefore, p} }

// ErrorAfter fails a write with probability p after it landed (a read
// simply fails).
func ErrorAfter(p float64) Injector { return probFault{"err-after", ErrAfter, p} }

// HangIO makes a call hang until its I/O timeout with probability p; a hung
// write lands before the timeout with probability 1/2.
func HangIO(p float64) Injector { return probFault{"hang", Hang, p} }

// torn makes a multi-sector write land partly.
type torn struct{ p float64 }

func (i torn) Inject(op Op, r *rand.Rand, o *Outcome) {
	if op.Kind != OpWrite || op.Sectors < 2 || o.Fault != NoFault || r.Float64() >= i.p {
		return
	}
	all := uint64(math.MaxUint64)
	if op.Sectors < 64 {
		all = 1<<op.Sectors - 1
	}
	o.Fault = Torn
	o.Land = r.Uint64() & all
	if o.Land == all { // a torn write must miss something
		o.Land &^= 1 << r.IntN(min(op.Sectors, 64))
	}
}

func (i torn) String() string { return "torn:" + fmtFloat(i.p) }

// TornWrite makes a write of two or more sectors land only on a random
// subset of its sectors (and fail) with probability p. Single-sector writes
// are never torn.
func TornWrite(p float64) Injector { return torn{p} }

// Dist is a latency distribution.
type Dist interface {
	Draw(r *rand.Rand) time.Duration
	String() string
}

// Exp is an exponential distribution with the given mean, capped at Max.
type Exp struct{ Mean, Max time.Duration }

// Draw implements Dist.
func (e Exp) Draw(r *rand.Rand) time.Duration {
	d := time.Duration(r.ExpFloat64() * float64(e.Mean))
	if e.Max > 0 && d > e.Max {
		d = e.Max
	}
	return d.Round(time.Microsecond)
}

func (e Exp) String() string { return "exp:" + e.Mean.String() + ":" + e.Max.String() }

// Uniform is uniform on [Min, Max).
type Uniform struct{ Min, Max time.Duration }

// Draw implements Dist.
func (u Uniform) Draw(r *rand.Rand) time.Duration {
	if u.Max <= u.Min {
		return u.Min
	}
	return (u.Min + time.Duration(r.Int64N(int64(u.Max-u.Min)))).Round(time.Microsecond)
}

func (u Uniform) String() string { return "uniform:" + u.Min.String() + ":" + u.Max.String() }

type latency struct {
	p    float64
	dist Dist
}

func (i latency) Inject(op Op, r *rand.Rand, o *Outcome) {
	if i.p > 0 && r.Float64() < i.p {
		o.Latency += i.dist.Draw(r)
	}
}

func (i latency) String() string { return "latency:" + fmtFloat(i.p) + ":" + i.dist.String() }

// Latency adds a delay drawn from d to a call with probability p. A delay
// longer than the caller's I/O timeout turns into a Hang.
func Latency(p float64, d Dist) Injector { return latency{p, d} }

// only applies an injector to some calls.
type only struct {
	name string
	pred func(Op) bool
	inj  Injector
}

func (i only) Inject(op Op, r *rand.Rand, o *Outcome) {
	if i.pred(op) {
		i.inj.Inject(op, r, o)
	}
}

func (i only) String() string { return i.name + "(" + i.inj.String() + ")" }

// Writes applies inj to writes only.
func Writes(inj Injector) Injector {
	return only{"writes", func(op Op) bool { return op.Kind == OpWrite }, inj}
}

// Reads applies inj to reads only.
func Reads(inj Injector) Injector {
	return only{"reads", func(op Op) bool { return op.Kind == OpRead }, inj}
}

// OnHost applies inj to the calls of one host only.
func OnHost(host int, inj Injector) Injector {
	return only{"host" + strconv.Itoa(host), func(op Op) bool { return op.Host == host }, inj}
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// ParseFaults parses the String form of a Chain of the basic injectors:
// a comma-separated list of err-before:P, err-after:P, hang:P, torn:P,
// latency:P:exp:MEAN:MAX and latency:P:uniform:MIN:MAX, each optionally
// wrapped in reads(...), writes(...) or hostN(...). "" is no faults.
func ParseFaults(s string) (Chain, error) {
	var c Chain
	for _, item := range splitTop(s) {
		inj, err := parseInjector(item)
		if err != nil {
			return nil, err
		}
		c = append(c, inj)
	}
	return c, nil
}

// splitTop splits s at the commas outside parentheses.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, ch := range s {
		switch ch {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if t := strings.TrimSpace(s[start:]); t != "" {
		out = append(out, t)
	}
	return out
}

func parseInjector(s string) (Injector, error) {
	if i := strings.IndexByte(s, '('); i > 0 && strings.HasSuffix(s, ")") {
		inner, err := parseInjector(s[i+1 : len(s)-1])
		if err != nil {
			return nil, err
		}
		switch name := s[:i]; {
		case name == "reads":
			return Reads(inner), nil
		case name == "writes":
			return Writes(inner), nil
		case strings.HasPrefix(name, "host"):
			h, err := strconv.Atoi(name[4:])
			if err != nil {
				return nil, fmt.Errorf("testdisk: bad host in %q", s)
			}
			return OnHost(h, inner), nil
		}
		return nil, fmt.Errorf("testdisk: unknown wrapper in %q", s)
	}
	f := strings.Split(s, ":")
	if len(f) < 2 {
		return nil, fmt.Errorf("testdisk: bad fault %q", s)
	}
	p, err := strconv.ParseFloat(f[1], 64)
	if err != nil || p < 0 || p > 1 {
		return nil, fmt.Errorf("testdisk: bad probability in %q", s)
	}
	switch {
	case f[0] == "err-before" && len(f) == 2:
		return ErrorBefore(p), nil
	case f[0] == "err-after" && len(f) == 2:
		return ErrorAfter(p), nil
	case f[0] == "hang" && len(f) == 2:
		return HangIO(p), nil
	case f[0] == "torn" && len(f) == 2:
		return TornWrite(p), nil
	case f[0] == "latency" && len(f) == 5:
		a, err1 := time.ParseDuration(f[3])
		b, err2 := time.ParseDuration(f[4])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("testdisk: bad durations in %q", s)
		}
		switch f[2] {
		case "exp":
			return Latency(p, Exp{a, b}), nil
		case "uniform":
			return Latency(p, Uniform{a, b}), nil
		}
	}
	return nil, fmt.Errorf("testdisk: bad fault %q", s)
}

// Stats counts what a Disk did.
type Stats struct {
	Reads, Writes uint64
	Faults        [len(faultNames)]uint64 // by Fault
	Delayed       uint64                  // calls with latency
	Cut           uint64                  // calls of a partitioned host
}

// Injected is the number of calls that got a fault (any but NoFault).
func (s Stats) Injected() uint64 {
	var n uint64
	for f := ErrBefore; int(f) < len(s.Faults); f++ {
		n += s.Faults[f]
	}
	return n
}

func (s Stats) String() string {
	return fmt.Sprintf("reads=%d writes=%d err-before=%d err-after=%d hang=%d torn=%d delayed=%d cut=%d",
		s.Reads, s.Writes, s.Faults[ErrBefore], s.Faults[ErrAfter], s.Faults[Hang], s.Faults[Torn], s.Delayed, s.Cut)
}

// Disk is shared storage with faults: one Mem, one Injector, one seeded
// random source, and a set of hosts cut off from it (partitions).
type Disk struct {
	Mem *Mem

	mu    sync.Mutex
	inj   Injector
	rnd   *rand.Rand
	seq   uint64
	cut   map[int]bool
	stats Stats
}

// NewDisk returns storage over mem whose faults come from inj (nil: none),
// decided by a random source seeded with seed.
func NewDisk(mem *Mem, inj Injector, seed uint64) *Disk {
	if inj == nil {
		inj = Chain(nil)
	}
	return &Disk{Mem: mem, inj: inj, rnd: rand.New(rand.NewPCG(seed, 0x7e57d15c)), cut: map[int]bool{}}
}

// Injector returns the disk's injector.
func (d *Disk) Injector() Injector { return d.inj }

// SetCut cuts host off from the disk (on) or reconnects it. A cut host's
// calls hang until their timeout, or fail at once with probability 1/2;
// none takes effect.
func (d *Disk) SetCut(host int, on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if on {
		d.cut[host] = true
	} else {
		delete(d.cut, host)
	}
}

// Stats returns the counters.
func (d *Disk) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// Decide numbers a call and decides its outcome.
func (d *Disk) Decide(kind OpKind, host int, off int64, n int) (Op, Outcome) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seq++
	ss := d.Mem.SectorSize()
	op := Op{Kind: kind, Host: host, Off: off, Len: n, Sectors: (n + ss - 1) / ss, Seq: d.seq}
	if kind == OpWrite {
		d.stats.Writes++
	} else {
		d.stats.Reads++
	}
	var o Outcome
	if d.cut[host] {
		d.stats.Cut++
		o.Fault = ErrBefore
		if d.rnd.IntN(2) == 0 {
			o.Fault = Hang
		}
		return op, o
	}
	d.inj.Inject(op, d.rnd, &o)
	d.stats.Faults[o.Fault]++
	if o.Latency > 0 {
		d.stats.Delayed++
	}
	return op, o
}

// Apply performs the data effect of a decided call on the Mem: a read fills
// p (except for ErrBefore), a write lands whole, partly (Torn) or not at all
// (ErrBefore, a Hang without Land). It returns the error the caller sees
// for faults other than Hang, and the Mem's own error otherwise. Apply
// ignores timeouts; the caller decides when a Hang ends.
func (d *Disk) Apply(op Op, o Outcome, p []byte) error {
	bg := context.Background()
	switch {
	case o.Fault == ErrBefore:
		return ErrInjected
	case o.Fault == Hang && (op.Kind == OpRead || o.Land == 0):
		return nil
	case op.Kind == OpRead:
		err := d.Mem.ReadAt(bg, p, op.Off)
		if err == nil && o.Fault == ErrAfter {
			err = ErrInjected
		}
		return err
	case o.Fault == Torn:
		ss := d.Mem.SectorSize()
		for i := 0; i*ss < len(p); i++ {
			if o.Land&(1<<min(i, 63)) != 0 {
				if err := d.Mem.WriteAt(bg, p[i*ss:(i+1)*ss], op.Off+int64(i*ss)); err != nil {
					return err
				}
			}
		}
		return ErrInjected
	}
	err := d.Mem.WriteAt(bg, p, op.Off)
	if err == nil && o.Fault == ErrAfter {
		err = ErrInjected
	}
	return err
}

// TimeoutError is what a hung call returns when its deadline passes.
func TimeoutError(cause error) error {
	return fmt.Errorf("%w: %v", rescode.ErrIOTimeout, cause)
}

// Port returns host's view of the disk as a diskfmt.Device. Each call is
// decided, then delayed by its latency on package time, then applied; a
// Hang (or a latency past the context deadline) blocks until the deadline
// and fails with rescode.ErrIOTimeout. Inside a synctest bubble every delay
// runs on fake time.
func (d *Disk) Port(host int) diskfmt.Device { return &port{d: d, host: host} }

type port struct {
	d    *Disk
	host int
}

var _ diskfmt.Device = (*port)(nil)

func (p *port) SectorSize() int { return p.d.Mem.SectorSize() }
func (p *port) Close() error    { return nil }

func (p *port) ReadAt(ctx context.Context, b []byte, off int64) error {
	return p.do(ctx, OpRead, b, off)
}

func (p *port) WriteAt(ctx context.Context, b []byte, off int64) error {
	return p.do(ctx, OpWrite, b, off)
}

func (p *port) do(ctx context.Context, kind OpKind, b []byte, off int64) error {
	if err := ctx.Err(); err != nil {
		return TimeoutError(err)
	}
	op, o := p.d.Decide(kind, p.host, off, len(b))
	if o.Fault == Hang {
		if o.Land != 0 {
			// lands at once, the caller still waits for its deadline
			p.d.Apply(op, o, b)
		}
		<-ctx.Done()
		return TimeoutError(ctx.Err())
	}
	if o.Latency > 0 {
		t := time.NewTimer(o.Latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return TimeoutError(ctx.Err())
		}
	}
	return p.d.Apply(op, o, b)
}
