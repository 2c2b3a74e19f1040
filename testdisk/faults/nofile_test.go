package faults_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/testdisk/harness"
)

// setNofile sets a running process's RLIMIT_NOFILE (soft and hard).
func setNofile(t *testing.T, pid int, n uint64) {
	t.Helper()
	rl := unix.Rlimit{Cur: n, Max: n}
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &rl, nil); err != nil {
		t.Fatalf("prlimit %d: %v", pid, err)
	}
}

func resultCode(err error) int {
	var ce *client.Error
	if errors.As(err, &ce) {
		return int(ce.Code)
	}
	return 0
}

// TestNofileRaisedAtStart: a daemon started with a soft RLIMIT_NOFILE
// below the hard one raises the soft limit to the hard one at start (a
// unit's LimitNOFILE= is then all that is needed). The daemon inherits
// this test process's limits: they are lowered while it starts (this test
// is not parallel, so no other test of the package runs meanwhile).
// sanlock 3.8.5 (full battery) is printed.
func TestNofileRaisedAtStart(t *testing.T) {
	needReal(t)
	for _, k := range kinds(false) {
		t.Run(string(k), func(t *testing.T) { nofileRaised(t, k) })
	}
}

func nofileRaised(t *testing.T, kind harness.Kind) {
	c := newCluster(t)
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	soft := uint64(512)
	if old.Max <= soft {
		t.Skipf("hard RLIMIT_NOFILE %d: no room below it", old.Max)
	}
	// syscall.Setrlimit (not x/sys/unix): os/exec then gives children
	// this limit instead of the one the process started with.
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: soft, Max: old.Max}); err != nil {
		t.Fatal(err)
	}
	h, err := c.AddHost(kind, "n"+string(kind))
	if rerr := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	var got unix.Rlimit
	if err := unix.Prlimit(h.Daemon().PID(), unix.RLIMIT_NOFILE, nil, &got); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: started with RLIMIT_NOFILE soft %d hard %d: now soft %d hard %d", kind, soft, old.Max, got.Cur, got.Max)
	if kind == harness.Go && (got.Cur != old.Max || got.Max != old.Max) {
		t.Errorf("daemon RLIMIT_NOFILE soft %d hard %d, want the soft limit raised to the hard one %d", got.Cur, got.Max, old.Max)
	}
}

// TestDescriptorsExhausted: a daemon limited to 256 descriptors; one
// registered client acquires leases on distinct files until the daemon
// runs out. Promised (ours): that acquire fails with -24 (EMFILE) and the
// log names the limit and LimitNOFILE; STATUS, a second client's
// registration and INQUIRE, and new connections keep working; after one
// release the next acquire succeeds. sanlock 3.8.5 (full battery) is run
// the same way and printed.
func TestDescriptorsExhausted(t *testing.T) {
	needReal(t)
	for _, k := range kinds(false) {
		t.Run(string(k), func(t *testing.T) { fdExhausted(t, k) })
	}
}

func fdExhausted(t *testing.T, kind harness.Kind) {
	const limit = 256
	const files = 300
	c := newCluster(t)
	const ls = "lsd"
	if err := c.InitLockspace("ls", ls, sfIO); err != nil {
		t.Fatal(err)
	}
	h, err := c.AddHost(kind, "d"+string(kind))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.AddLockspace(ls, 1, "ls", sfIO); err != nil {
		t.Fatal(err)
	}
	cl := h.Client()
	// The leases are written in the backing files directly (as
	// WRITE_RESOURCE with num_hosts 8 would, without 300 round trips
	// through the daemon and FUSE).
	lw := newLeaseWriter(t, ls)
	for i := 0; i < files; i++ {
		f := fmt.Sprintf("r%03d", i)
		if err := c.CreateFile(f, 1<<20); err != nil {
			t.Fatal(err)
		}
		lw.write(c.BackingPath(f), f, 0)
	}
	if r := h.Resource(ls, "r299", "r299"); true {
		if _, err := cl.ReadResource(context.Background(), &r); err != nil {
			t.Fatalf("read_resource r299: %v", err)
		}
	}
	dpid := h.Daemon().PID()
	setNofile(t, dpid, limit)
	reg, err := cl.Register(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	got, code := 0, 0
	var firstErr error
	for i := 0; i < files; i++ {
		f := fmt.Sprintf("r%03d", i)
		if err := reg.Acquire(context.Background(), []client.Resource{h.Resource(ls, f, f)}, 0, nil); err != nil {
			firstErr, code = err, resultCode(err)
			break
		}
		got++
	}
	st, _ := readStats(dpid)
	// Every other client.
	_, stErr := probe(h, 2*time.Second)
	reg2, r2err := cl.Register(context.Background())
	var inqErr error
	if r2err == nil {
		_, inqErr = reg2.Inquire(context.Background())
		reg2.Close()
	}
	// One release, then the next acquire.
	var relErr, reacqErr error
	if got > 0 {
		_, relErr = reg.Release(context.Background(), []client.Resource{{LockspaceName: ls, Name: "r000"}}, 0)
		if code != 0 && got < files {
			f := fmt.Sprintf("r%03d", got)
			reacqErr = reg.Acquire(context.Background(), []client.Resource{h.Resource(ls, f, f)}, 0, nil)
		}
	}
	logText := ""
	logs, _ := filepath.Glob(filepath.Join(h.Dir, "daemon.*.log"))
	for _, p := range logs {
		b, _ := os.ReadFile(p)
		logText += string(b)
	}
	hint := ""
	for _, l := range strings.Split(logText, "\n") {
		if strings.Contains(l, "LimitNOFILE") {
			hint = l
			break
		}
	}
	t.Logf("%s: NOFILE %d, %d distinct lease files: %d leases acquired, then %v (code %d); daemon {%v}; "+
		"then STATUS err %v, 2nd client register %v inquire %v, release %v, next acquire %v; log: %q",
		kind, limit, files, got, firstErr, code, st, stErr, r2err, inqErr, relErr, reacqErr, hint)
	if kind != harness.Go {
		return
	}
	if code != -24 {
		t.Errorf("acquire out of descriptors: %v (code %d), want -24", firstErr, code)
	}
	if stErr != nil || r2err != nil || inqErr != nil || relErr != nil || reacqErr != nil {
		t.Errorf("other clients affected: status %v, register %v, inquire %v, release %v, acquire after release %v",
			stErr, r2err, inqErr, relErr, reacqErr)
	}
	if hint == "" {
		t.Errorf("no log line naming the limit and LimitNOFILE")
	}
}

// TestManyLeasesOneFile: a daemon limited to 1,024 descriptors holds
// 10,000 leases of one lease file (1 MiB apart). Promised: all acquired,
// at most 64 descriptors open, STATUS answered. This holds only with
// shared, reference-counted opens per path: with one open per held lease
// the daemon stops at about 960. Full: one registered client acquires
// them all (the case), and sanlock 3.8.5 runs the same case,
// printed. Short: manyLeasesClients registered clients acquire a share
// each at once (the same 10,000 leases held by one daemon, in less time).
func TestManyLeasesOneFile(t *testing.T) {
	t.Parallel()
	needReal(t)
	for _, k := range kinds(false) {
		t.Run(string(k), func(t *testing.T) {
			t.Parallel()
			manyLeases(t, k)
		})
	}
}

const (
	manyLeasesN     = 10000
	manyLeasesLimit = 1024 // the daemon's RLIMIT_NOFILE
	manyLeasesFDs   = 64   // at most this many descriptors open
)

// manyLeasesClients is how many registered clients share the acquires in
// the short battery (GOSANLOCK_FAULTS_LEASE_CLIENTS overrides it).
func manyLeasesClients() int {
	if v, err := strconv.Atoi(os.Getenv("GOSANLOCK_FAULTS_LEASE_CLIENTS")); err == nil && v > 0 {
		return v
	}
	return pick(8, 1)
}

// manyLeasesDirect: the short battery's leases are on the backing file,
// not on the FUSE view (GOSANLOCK_FAULTS_LEASE_DIRECT=0/1 overrides it).
func manyLeasesDirect() bool {
	if v, err := strconv.ParseBool(os.Getenv("GOSANLOCK_FAULTS_LEASE_DIRECT")); err == nil {
		return v
	}
	return !full()
}

func manyLeases(t *testing.T, kind harness.Kind) {
	n := manyLeasesN
	if v, err := strconv.Atoi(os.Getenv("GOSANLOCK_FAULTS_LEASES")); err == nil && v > 0 {
		n = v // for measuring
	}
	nc := manyLeasesClients()
	c := newCluster(t)
	const ls = "lsm"
	if err := c.InitLockspace("ls", ls, sfIO); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateFile("many", int64(n)<<20); err != nil {
		t.Fatal(err)
	}
	h, err := c.AddHost(kind, "m"+string(kind))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.AddLockspace(ls, 1, "ls", sfIO); err != nil {
		t.Fatal(err)
	}
	cl := h.Client()
	// The lease file through the host's FUSE view (full), or the backing
	// file itself (short: no fault is injected here, and the FUSE round
	// trips are most of the time of 10,000 acquires).
	path, via := h.Path("many"), "FUSE view"
	if manyLeasesDirect() {
		path, via = c.BackingPath("many"), "backing file, no FUSE"
	}
	res := func(i int) client.Resource {
		return client.Resource{LockspaceName: ls, Name: fmt.Sprintf("m%05d", i),
			Disks: []client.Disk{{Path: path, Offset: uint64(i) << 20}}}
	}
	// Initialise the leases in the backing file directly (as WRITE_RESOURCE
	// with num_hosts 8 would, but without 10,000 round trips): the area of
	// one lease, its leader renamed for each, in the first 4 KiB of each
	// 1 MiB slot.
	start := time.Now()
	lw := newLeaseWriter(t, ls)
	for i := 0; i < n; i++ {
		lw.write(c.BackingPath("many"), res(i).Name, int64(i)<<20)
	}
	for _, i := range []int{0, n - 1} {
		r := res(i)
		if _, err := cl.ReadResource(context.Background(), &r); err != nil {
			t.Fatalf("read_resource of lease %d: %v", i, err)
		}
	}
	initTook := time.Since(start)
	dpid := h.Daemon().PID()
	setNofile(t, dpid, manyLeasesLimit)
	regs := make([]*client.Reg, nc)
	for j := range regs {
		if regs[j], err = cl.Register(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer regs[j].Close()
	}
	smp := startSampler(dpid, 200*time.Millisecond)
	start = time.Now()
	var (
		got    atomic.Int64
		mu     sync.Mutex
		acqErr error
		wg     sync.WaitGroup
	)
	for j, reg := range regs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from, to := j*n/nc, (j+1)*n/nc
			for i := from; i < to; i += client.MaxResources {
				var batch []client.Resource
				for k := i; k < min(to, i+client.MaxResources); k++ {
					batch = append(batch, res(k))
				}
				if err := reg.Acquire(context.Background(), batch, 0, nil); err != nil {
					mu.Lock()
					acqErr = errors.Join(acqErr, fmt.Errorf("client %d at lease %d: %w", j, i, err))
					mu.Unlock()
					return
				}
				got.Add(int64(len(batch)))
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	peak := smp.Stop()
	// STATUS lists every lease held: 10,000 of them here.
	stTook, stErr := probe(h, 10*time.Second)
	t.Logf("%s: %d leases on one file (%s) under NOFILE %d, %d registered client(s): %d acquired in %v (%.0f/s; init %v), stopped by %v; daemon peak {%v}; STATUS %v (err %v)",
		kind, n, via, manyLeasesLimit, nc, got.Load(), took.Round(time.Millisecond), float64(got.Load())/took.Seconds(),
		initTook.Round(time.Millisecond), acqErr, peak, stTook.Round(time.Millisecond), stErr)
	// Kill the daemon with the leases held: releasing 10,000 of them at
	// cleanup is not what this case is about (and would take as long as
	// their acquisition).
	_, _ = h.Kill()
	if kind != harness.Go {
		return
	}
	if int(got.Load()) != n {
		t.Errorf("acquired %d of %d leases (needs one shared open per path)", got.Load(), n)
	}
	if peak.FDs > manyLeasesFDs {
		t.Errorf("peak %d descriptors open, want <= %d (needs one shared open per path)", peak.FDs, manyLeasesFDs)
	}
	if stErr != nil {
		t.Errorf("STATUS: %v", stErr)
	}
}

// TestAcceptOutOfDescriptors: a daemon limited to 64 descriptors gets 100
// connections. Promised (ours): connections beyond the limit are accepted
// and closed at once (the client sees EOF, not a hang), the listener keeps
// going, and once descriptors are free again STATUS is answered at once.
// sanlock 3.8.5 (full battery) is run the same way and printed.
func TestAcceptOutOfDescriptors(t *testing.T) {
	needReal(t)
	for _, k := range kinds(false) {
		t.Run(string(k), func(t *testing.T) { acceptEMFILE(t, k) })
	}
}

func acceptEMFILE(t *testing.T, kind harness.Kind) {
	c := newCluster(t)
	h, err := c.AddHost(kind, "e"+string(kind))
	if err != nil {
		t.Fatal(err)
	}
	setNofile(t, h.Daemon().PID(), 64)
	sock := h.Client().SockPath
	var conns []net.Conn
	closed, hung, refused := 0, 0, 0
	for i := 0; i < 100; i++ {
		x, err := net.DialTimeout("unix", sock, time.Second)
		if err != nil {
			refused++
			continue
		}
		conns = append(conns, x)
	}
	// Which of them did the daemon close? A closed one reads EOF at once.
	for _, x := range conns {
		_ = x.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		var b [1]byte
		if _, err := x.Read(b[:]); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				hung++
			} else {
				closed++
			}
		}
	}
	// A request on a full daemon: answered or closed, never left hanging.
	_, fullErr := probe(h, 3*time.Second)
	for _, x := range conns {
		x.Close()
	}
	var d time.Duration
	var afterErr error
	var tries int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		tries++
		if d, afterErr = probe(h, 3*time.Second); afterErr == nil || time.Now().After(deadline) {
			break
		}
	}
	st, _ := readStats(h.Daemon().PID())
	t.Logf("after closing: %d tries, daemon {%v}", tries, st)
	t.Logf("%s: NOFILE 64, 100 connections: %d open (idle), %d closed by the daemon, %d refused at connect; "+
		"STATUS while full: %v; after closing them: %v (err %v)", kind, hung, closed, refused, fullErr, d.Round(time.Microsecond), afterErr)
	if kind != harness.Go {
		return
	}
	if fullErr != nil && strings.Contains(fullErr.Error(), "timeout") {
		t.Errorf("STATUS on a daemon out of descriptors hung: %v", fullErr)
	}
	if closed == 0 {
		t.Errorf("no connection was closed at accept")
	}
	if afterErr != nil {
		t.Errorf("STATUS after the connections closed: %v", afterErr)
	}
}

// leaseWriter writes free resource leases (num_hosts 8, 512-byte sectors,
// 1 MiB align) of one lockspace into backing files, as WRITE_RESOURCE
// would: leader and empty request record in the first 4 KiB of the slot
// (the rest of a new file's slot is zero already).
type leaseWriter struct {
	t    *testing.T
	ld   diskfmt.Leader
	slot []byte
}

func newLeaseWriter(t *testing.T, ls string) *leaseWriter {
	t.Helper()
	g, err := diskfmt.GeometryForWrite(0, 512)
	if err != nil {
		t.Fatal(err)
	}
	area, err := diskfmt.InitPaxosArea(diskfmt.PaxosInit{Geometry: g, SpaceName: ls, ResourceName: "x", NumHosts: 8})
	if err != nil {
		t.Fatal(err)
	}
	w := &leaseWriter{t: t, slot: append([]byte(nil), area[:4096]...)}
	if w.ld, err = diskfmt.DecodeLeader(w.slot); err != nil {
		t.Fatal(err)
	}
	return w
}

// write writes the lease of resource name at off of the file at path.
func (w *leaseWriter) write(path, name string, off int64) {
	w.t.Helper()
	var err error
	if w.ld.ResourceName, err = diskfmt.Name(name); err != nil {
		w.t.Fatal(err)
	}
	w.ld.Seal(w.slot)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		w.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(w.slot, off); err != nil {
		w.t.Fatal(err)
	}
}
