package delta_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/testdisk"
)

const space = "LS"

var geo512 = diskfmt.Geometry{SectorSize: 512, AlignSize: diskfmt.Align1M, MaxHosts: 2000}

// newLockspaceDisk returns a Mem holding a freshly initialised lockspace
// whose leases carry io_timeout io.
func newLockspaceDisk(t *testing.T, g diskfmt.Geometry, io int) *testdisk.Mem {
	t.Helper()
	m := testdisk.NewMem(int64(g.AlignSize), g.SectorSize)
	require.NoError(t, diskfmt.WriteLockspace(context.Background(), m, 0, diskfmt.SizeFlags(g), space, uint16(io), 0))
	return m
}

// faultDev is one host's view of the shared disk, with switchable faults.
// A hung I/O blocks until its context deadline, like an I/O that never
// completes.
type faultDev struct {
	*testdisk.Mem
	failReads, failWrites atomic.Bool
	hangReads, hangWrites atomic.Bool
	reads, writes         atomic.Int64
}

func newFaultDev(m *testdisk.Mem) *faultDev { return &faultDev{Mem: m} }

func hang(ctx context.Context) error {
	<-ctx.Done()
	return fmt.Errorf("%w: %v", rescode.ErrIOTimeout, ctx.Err())
}

func (d *faultDev) ReadAt(ctx context.Context, p []byte, off int64) error {
	d.reads.Add(1)
	switch {
	case d.hangReads.Load():
		return hang(ctx)
	case d.failReads.Load():
		return syscall.EIO
	}
	return d.Mem.ReadAt(ctx, p, off)
}

func (d *faultDev) WriteAt(ctx context.Context, p []byte, off int64) error {
	d.writes.Add(1)
	switch {
	case d.hangWrites.Load():
		return hang(ctx)
	case d.failWrites.Load():
		return syscall.EIO
	}
	return d.Mem.WriteAt(ctx, p, off)
}

// Close leaves the shared Mem open for the other hosts.
func (d *faultDev) Close() error { return nil }

// crash makes every I/O of this host fail: it stops renewing and, its last
// attempt having failed, never releases.
func (d *faultDev) crash() {
	d.failReads.Store(true)
	d.failWrites.Store(true)
}

// host is one simulated host running a Lockspace and a one-second "main
// loop" (own-lease check, then host processing) as the daemon would.
type host struct {
	name  string
	dev   *faultDev
	clock *clock.System
	ls    *delta.Lockspace

	cancel context.CancelFunc
	runErr error
	exited chan struct{} // closed after runErr is set

	mu     sync.Mutex
	events []delta.ReceivedEvent
	evAt   []uint64 // our monotime of each event
	reqs   []uint64
	checks []check
}

type check struct {
	at    uint64
	state delta.OwnLeaseState
	gap   uint64
}

type hostOpts struct {
	hostID   uint64
	name     string
	io       int
	base     time.Duration // the host's clock origin; differs per host
	sbs      int
	geometry diskfmt.Geometry
}

// startHost starts a host's lockspace and main loop; both end when ctx is
// cancelled or stop is called.
func startHost(t *testing.T, ctx context.Context, m *testdisk.Mem, o hostOpts) *host {
	t.Helper()
	if o.base == 0 {
		o.base = time.Duration(1000*o.hostID) * time.Second
	}
	// Hosts start on the half-second grid (see offGrid); the clock reads
	// base when the host starts.
	const half = 500 * time.Millisecond
	delay := (half - time.Duration(time.Now().UnixNano())%half) % half
	h := &host{name: o.name, dev: newFaultDev(m), clock: clock.NewAt(o.base - delay)}
	ls, err := delta.New(delta.Config{
		Dev: h.dev, Space: space, HostID: o.hostID, HostName: o.name, IOTimeout: o.io,
		SetBitmapSeconds: o.sbs, Geometry: o.geometry, Clock: h.clock,
		Log: zaptest.NewLogger(t).Named(o.name),
	})
	require.NoError(t, err)
	h.ls = ls
	ctx, h.cancel = context.WithCancel(ctx)
	h.exited = make(chan struct{})
	go func() {
		defer close(h.exited)
		time.Sleep(delay)
		go h.mainLoop(ctx)
		h.runErr = ls.Run(ctx)
	}()
	return h
}

func (h *host) mainLoop(ctx context.Context) {
	select {
	case <-h.ls.Joined():
	case <-ctx.Done():
		return
	}
	if h.ls.Status().AcquireLastResult != rescode.OK {
		return
	}
	for h.clock.Sleep(ctx, time.Second) == nil {
		st, gap := h.ls.CheckOwnLease()
		now := clock.Monotime(h.clock)
		h.mu.Lock()
		h.checks = append(h.checks, check{now, st, gap})
		h.mu.Unlock()
		if st.Failed() {
			continue
		}
		res, ok := h.ls.ProcessHosts()
		if !ok {
			continue
		}
		h.mu.Lock()
		for _, e := range res.Events {
			h.events = append(h.events, e)
			h.evAt = append(h.evAt, now)
		}
		h.reqs = append(h.reqs, res.Requests...)
		h.mu.Unlock()
	}
}

// stop cancels the host and waits for Run to return.
func (h *host) stop() error {
	h.cancel()
	<-h.exited
	return h.runErr
}

func (h *host) now() uint64 { return clock.Monotime(h.clock) }

func (h *host) receivedEvents() ([]delta.ReceivedEvent, []uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]delta.ReceivedEvent(nil), h.events...), append([]uint64(nil), h.evAt...)
}

func (h *host) ownChecks() []check {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]check(nil), h.checks...)
}

// leaseOnDisk decodes host_id id's lease from the shared disk.
func leaseOnDisk(t *testing.T, m *testdisk.Mem, g diskfmt.Geometry, id uint64) (diskfmt.Leader, []byte) {
	t.Helper()
	b := m.Bytes()
	off := diskfmt.DeltaSectorOffset(id, g.SectorSize)
	sec := b[off : off+int64(g.SectorSize)]
	l, err := diskfmt.VerifyDelta(sec, space)
	require.NoError(t, err)
	return l, sec
}

// waitJoined waits for h's acquire to finish and returns its result code.
// It then moves the test off the half-second grid (see offGrid).
func waitJoined(h *host) rescode.Code {
	<-h.ls.Joined()
	offGrid()
	return h.ls.Status().AcquireLastResult
}

// offGrid sleeps until the fake time is at .25 or .75 of a second. Every
// host sleeps whole and half seconds from instants on that half-second grid
// and its I/O takes no fake time, so a test that looks at shared state off
// the grid never races with a renewal or main-loop pass that runs at the
// same fake instant. Test sleeps in multiples of 0.5 s keep it off-grid.
func offGrid() {
	const half = 500 * time.Millisecond
	frac := time.Duration(time.Now().UnixNano()) % half
	d := half/2 - frac
	if d <= 0 {
		d += half
	}
	time.Sleep(d)
}

// sleep advances the bubble's fake time.
func sleep(d time.Duration) { time.Sleep(d) }

func seconds(n int) time.Duration { return time.Duration(n) * time.Second }
