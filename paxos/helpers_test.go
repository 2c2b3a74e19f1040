package paxos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/testdisk"
)

const (
	testSpace = "LS"
	testRes   = "R1"
	testIO    = 1  // io_timeout of every test host
	testW     = 60 // watchdog fire timeout
)

var (
	geo512 = diskfmt.Geometry{SectorSize: 512, AlignSize: diskfmt.Align1M, MaxHosts: 2000}
	geo4K  = diskfmt.Geometry{SectorSize: 4096, AlignSize: diskfmt.Align1M, MaxHosts: 250}
)

// world is the fake lockspace: which hosts are alive, as every viewer's
// Liveness sees it. A live host's delta timestamp changes every second and
// its status entry was checked and seen live "just now"; a dead host's
// timestamp is frozen and it was last seen live when it died.
type world struct {
	mu    sync.Mutex
	start time.Time
	hosts map[uint64]*worldHost
	reads atomic.Int64 // delta lease reads
}

type worldHost struct {
	gen    uint64
	alive  bool
	left   bool // released its host_id (timestamp 0)
	ts     uint64
	diedAt time.Time
}

func newWorld() *world { return &world{start: time.Now(), hosts: map[uint64]*worldHost{}} }

func (w *world) join(id, gen uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hosts[id] = &worldHost{gen: gen, alive: true}
}

// kill stops host id renewing from now on.
func (w *world) kill(id uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.hosts[id]
	h.ts = w.tsLocked(h)
	h.alive, h.diedAt = false, time.Now()
}

func (w *world) tsLocked(h *worldHost) uint64 {
	if !h.alive {
		return h.ts
	}
	return uint64(time.Since(w.start)/time.Second) + 5000
}

// view is one host's Liveness over the world, on that host's clock.
type view struct {
	w     *world
	clock clock.Clock
	first uint64
}

func (v *view) Host(id uint64) (HostView, bool) {
	v.w.mu.Lock()
	defer v.w.mu.Unlock()
	h, ok := v.w.hosts[id]
	if !ok {
		return HostView{}, false
	}
	now := clock.Monotime(v.clock)
	hv := HostView{FirstCheck: v.first}
	hv.HostID, hv.OwnerID, hv.OwnerGeneration, hv.IOTimeout = id, id, h.gen, testIO
	hv.LastCheck, hv.LastLive, hv.Timestamp = now, now, v.w.tsLocked(h)
	if !h.alive {
		hv.LastLive = uint64((v.clock.Now() - time.Since(h.diedAt)) / time.Second)
	}
	if h.left {
		hv.Timestamp = 0
	}
	return hv, true
}

func (v *view) ReadDeltaLease(_ context.Context, id uint64) (diskfmt.Leader, error) {
	v.w.reads.Add(1)
	v.w.mu.Lock()
	defer v.w.mu.Unlock()
	h, ok := v.w.hosts[id]
	if !ok {
		return diskfmt.Leader{Magic: diskfmt.DeltaMagic}, nil
	}
	ts := v.w.tsLocked(h)
	if h.left {
		ts = 0
	}
	return diskfmt.Leader{Magic: diskfmt.DeltaMagic, OwnerID: id, OwnerGeneration: h.gen, Timestamp: ts}, nil
}

// cluster is one lease on shared Mem disks plus the hosts using it.
type cluster struct {
	t     *testing.T
	g     diskfmt.Geometry
	off   int64
	mems  []*testdisk.Mem
	world *world
}

// newCluster initialises the lease "R1" with numHosts dblocks on ndisks
// disks, at offset g.AlignSize. The devices are large enough for the LVB
// sector even where it lies outside the lease area.
func newCluster(t *testing.T, g diskfmt.Geometry, ndisks int, numHosts uint64) *cluster {
	t.Helper()
	return newClusterSize(t, g, ndisks, numHosts, 0)
}

// newClusterSize is newCluster with at least minSize bytes after the lease
// offset.
func newClusterSize(t *testing.T, g diskfmt.Geometry, ndisks int, numHosts uint64, minSize int64) *cluster {
	t.Helper()
	c := &cluster{t: t, g: g, off: int64(g.AlignSize), world: newWorld()}
	area, err := diskfmt.InitPaxosArea(diskfmt.PaxosInit{Geometry: g, SpaceName: testSpace, ResourceName: testRes, NumHosts: numHosts})
	require.NoError(t, err)
	size := c.off + max(int64(g.AlignSize), int64((diskfmt.LVBSector+1)*g.SectorSize), minSize)
	for range ndisks {
		m := testdisk.NewMem(size, g.SectorSize)
		m.Load(area, c.off)
		c.mems = append(c.mems, m)
	}
	return c
}

// host makes host id (generation gen) join the world and returns its lease
// handle. wrap, if set, wraps each of its devices.
func (c *cluster) host(id, gen uint64, wrap func(i int, d diskfmt.Device) diskfmt.Device) *Lease {
	c.world.join(id, gen)
	clk := clock.NewAt(time.Duration(1000*id) * time.Second) // every host has its own clock
	h := &Host{
		ID: id, Generation: gen, Space: testSpace, Geometry: c.g,
		IOTimeout: testIO, WatchdogFireTimeout: testW, ShRetries: DefaultShRetries,
		Clock: clk, Rand: rand.New(rand.NewPCG(id, 42)),
		Live: &view{w: c.world, clock: clk, first: clock.Monotime(clk)},
		Log:  zaptest.NewLogger(c.t).Named(fmt.Sprintf("h%d", id)),
	}
	l := &Lease{Host: h, Name: testRes}
	for i, m := range c.mems {
		var d diskfmt.Device = m
		if wrap != nil {
			d = wrap(i, d)
		}
		l.Disks = append(l.Disks, Disk{Dev: d, Offset: c.off})
	}
	return l
}

// leader decodes the leader on disk i.
func (c *cluster) leader(i int) diskfmt.Leader {
	b := c.mems[i].Bytes()[c.off:]
	ld, err := diskfmt.DecodeLeader(b)
	require.NoError(c.t, err)
	return ld
}

// sector returns host id's dblock and mode block on disk i.
func (c *cluster) hostBlock(i int, id uint64) (diskfmt.Dblock, diskfmt.ModeBlock) {
	ss := c.g.SectorSize
	b := c.mems[i].Bytes()[c.off+hostOffset(id, ss):]
	d, err := diskfmt.DecodeDblock(b)
	require.NoError(c.t, err)
	mb, _ := diskfmt.DecodeModeBlock(b[diskfmt.ModeBlockOffset:])
	return d, mb
}

// ioOp is one recorded device call.
type ioOp struct {
	Write bool
	Off   int64 // relative to the lease
	Len   int
}

func (o ioOp) String() string {
	k := "PREAD "
	if o.Write {
		k = "PWRITE"
	}
	return fmt.Sprintf("%s %7d @ %d", k, o.Len, o.Off)
}

// countDev records every call.
type countDev struct {
	diskfmt.Device
	base int64
	mu   sync.Mutex
	ops  []ioOp
}

func (d *countDev) ReadAt(ctx context.Context, p []byte, off int64) error {
	d.mu.Lock()
	d.ops = append(d.ops, ioOp{false, off - d.base, len(p)})
	d.mu.Unlock()
	return d.Device.ReadAt(ctx, p, off)
}

func (d *countDev) WriteAt(ctx context.Context, p []byte, off int64) error {
	d.mu.Lock()
	d.ops = append(d.ops, ioOp{true, off - d.base, len(p)})
	d.mu.Unlock()
	return d.Device.WriteAt(ctx, p, off)
}

// take returns and forgets the recorded calls.
func (d *countDev) take() []ioOp {
	d.mu.Lock()
	defer d.mu.Unlock()
	o := d.ops
	d.ops = nil
	return o
}

// failDev fails every call with EIO while failing is set.
type failDev struct {
	diskfmt.Device
	failing atomic.Bool
}

func (d *failDev) ReadAt(ctx context.Context, p []byte, off int64) error {
	if d.failing.Load() {
		return syscall.EIO
	}
	return d.Device.ReadAt(ctx, p, off)
}

func (d *failDev) WriteAt(ctx context.Context, p []byte, off int64) error {
	if d.failing.Load() {
		return syscall.EIO
	}
	return d.Device.WriteAt(ctx, p, off)
}

// slowDev sleeps a random 0..maxDelay of (fake) time before each call, so
// that hosts running in one synctest bubble interleave their I/O.
type slowDev struct {
	diskfmt.Device
	mu       sync.Mutex
	rnd      *rand.Rand
	maxDelay time.Duration
}

func (d *slowDev) delay() {
	d.mu.Lock()
	n := time.Duration(d.rnd.Int64N(int64(d.maxDelay)))
	d.mu.Unlock()
	time.Sleep(n)
}

func (d *slowDev) ReadAt(ctx context.Context, p []byte, off int64) error {
	d.delay()
	return d.Device.ReadAt(ctx, p, off)
}

func (d *slowDev) WriteAt(ctx context.Context, p []byte, off int64) error {
	d.delay()
	return d.Device.WriteAt(ctx, p, off)
}

// gateDev blocks the n-th call (1-based) until release is closed. The
// blocked call is then issued without its deadline: it models a host that
// paused before the I/O, not a hung I/O.
type gateDev struct {
	diskfmt.Device
	n       atomic.Int64
	at      int64
	reached chan struct{}
	release chan struct{}
}

func newGateDev(d diskfmt.Device, at int64) *gateDev {
	return &gateDev{Device: d, at: at, reached: make(chan struct{}), release: make(chan struct{})}
}

func (d *gateDev) gate(ctx context.Context) context.Context {
	if d.n.Add(1) == d.at {
		close(d.reached)
		<-d.release
		return context.Background()
	}
	return ctx
}

func (d *gateDev) ReadAt(ctx context.Context, p []byte, off int64) error {
	return d.Device.ReadAt(d.gate(ctx), p, off)
}

func (d *gateDev) WriteAt(ctx context.Context, p []byte, off int64) error {
	return d.Device.WriteAt(d.gate(ctx), p, off)
}

// code is the sanlock result of err.
func code(err error) rescode.Code { return rescode.CodeOf(err) }

// leaderOf returns the Leader carried by a paxos *Error.
func leaderOf(t *testing.T, err error) diskfmt.Leader {
	t.Helper()
	pe, ok := err.(*Error)
	require.True(t, ok, "error %v is not *Error", err)
	require.NotNil(t, pe.Leader, "error %v has no leader", err)
	return *pe.Leader
}

var bg = context.Background()
