package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/gosanlock/gosanlock/client"
)

const lsName = "BENCH"

// latStats are the figures of a list of pair latencies: pairs per second
// of the time spent in them (so a driver's start-up does not count), p50
// and p99 in ms.
func latStats(lat []time.Duration) (perSec, p50, p99 float64) {
	s := slices.Clone(lat)
	slices.Sort(s)
	var total time.Duration
	for _, d := range s {
		total += d
	}
	pct := func(p float64) float64 {
		return float64(s[int(math.Round(p*float64(len(s)-1)))]) / 1e6
	}
	return float64(len(s)) / total.Seconds(), pct(0.50), pct(0.99)
}

// leaseGroup runs the serial, parallel and contention cases: per run, the
// floor, then for each implementation one daemon joined to one lockspace
// (host_id 1) that serves the three cases one after the other.
func (r *runner) leaseGroup(ctx context.Context) ([]*Table, error) {
	c := &r.cfg
	serial := newTable(CaseSerial, fmt.Sprintf("serial acquire+release of one EX lease, %d pairs, io_timeout %d, one registered Go client", c.Serial, c.IOTimeout), append([]string{ColFloor}, r.cols...))
	serial.note("floor: the same I/O sequence (3 x (1 MiB read + 512 B write), then 512 B write, read, write) by this program, O_DIRECT|O_SYNC, no daemon")
	serial.note("p50 row, <impl>/floor column: p50 over the floor's p50 in the same run")
	par := newTable(CaseParallel, fmt.Sprintf("%d clients, %d leases on %d files, %d pairs each, io_timeout %d", c.ParClients, c.ParClients, c.ParClients, c.ParPairs, c.IOTimeout), append([]string{ColFloor}, r.cols...))
	par.note("floor: %d concurrent floor sequences on %d files", c.ParClients, c.ParClients)
	cont := newTable(CaseContention, fmt.Sprintf("%d clients acquire/release random ones of %d EX resources (one file) on one daemon for %s, io_timeout %d", c.ContProcs, c.ContResources, c.ContDuration, c.IOTimeout), r.cols)
	cont.note("each client is its own registered connection; after a failed acquire it waits a random 0-5 ms")
	if r.python {
		serial.note("python3-sanlock rows: the same loop driven by %s through libsanlock", c.Python)
	}
	for run := 0; run < c.Runs; run++ {
		if err := r.leaseRun(ctx, run, serial, par, cont); err != nil {
			return []*Table{serial, par, cont}, err
		}
	}
	var out []*Table
	for _, t := range []*Table{serial, par, cont} {
		if c.has(t.Case) {
			out = append(out, t)
		}
	}
	return out, nil
}

func (r *runner) leaseRun(ctx context.Context, run int, serial, par, cont *Table) error {
	c := &r.cfg
	dir, err := r.tempDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if c.has(CaseSerial) {
		c.progress("run %d/%d serial: floor", run+1, c.Runs)
		lat, err := floorSerial(ctx, filepath.Join(dir, "floor.lease"), c.Serial)
		if err != nil {
			return err
		}
		ps, p50, p99 := latStats(lat)
		serial.set(run, "pairs/s", ColFloor, ps)
		serial.set(run, "p50 (ms)", ColFloor, p50)
		serial.set(run, "p99 (ms)", ColFloor, p99)
	}
	if c.has(CaseParallel) {
		c.progress("run %d/%d parallel: floor", run+1, c.Runs)
		var paths []string
		for i := range c.ParClients {
			paths = append(paths, filepath.Join(dir, fmt.Sprintf("floor%d.lease", i)))
		}
		ps, err := floorParallel(ctx, paths, c.ParPairs)
		if err != nil {
			return err
		}
		par.set(run, "pairs/s", ColFloor, ps)
	}
	for _, im := range r.order(run) {
		if err := r.leaseImpl(ctx, run, im, dir, serial, par, cont); err != nil {
			return err
		}
	}
	return nil
}

// leaseImpl starts one daemon of im and runs the selected lease cases.
func (r *runner) leaseImpl(ctx context.Context, run int, im Impl, dir string, serial, par, cont *Table) error {
	c := &r.cfg
	dir = filepath.Join(dir, im.Name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	lsPath := filepath.Join(dir, "ls.lease")
	if err := makeFile(lsPath, mib, true); err != nil {
		return err
	}
	nres := 1
	if c.has(CaseParallel) {
		nres = c.ParClients
	}
	var res []client.Resource
	for i := range nres {
		p := filepath.Join(dir, fmt.Sprintf("r%d.lease", i))
		if err := makeFile(p, mib, true); err != nil {
			return err
		}
		res = append(res, resource(lsName, fmt.Sprintf("R%d", i), p, 0))
	}
	var contRes []client.Resource
	if c.has(CaseContention) {
		p := filepath.Join(dir, "cont.lease")
		if err := makeFile(p, int64(c.ContResources)*mib, true); err != nil {
			return err
		}
		for i := range c.ContResources {
			contRes = append(contRes, resource(lsName, fmt.Sprintf("C%d", i), p, uint64(i)*mib))
		}
	}
	err := withFormatter(ctx, im, func(d *daemon) error {
		if err := formatLockspace(d, lsName, lsPath, c.IOTimeout); err != nil {
			return err
		}
		for _, x := range append(slices.Clone(res), contRes...) {
			if err := formatResource(d, x); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	var env []string
	pprofAddr := ""
	if im.Ours && c.PprofDir != "" && c.has(CaseSerial) {
		if pprofAddr, err = freeLoopbackAddr(); err != nil {
			return err
		}
		env = append(env, "SANLOCK_PPROF="+pprofAddr)
	}
	d, err := startDaemon(ctx, im, nil, env...)
	if err != nil {
		return err
	}
	defer d.stop()
	if err := d.join(lsName, lsPath, 1, c.IOTimeout); err != nil {
		return err
	}
	if c.has(CaseSerial) {
		c.progress("run %d/%d serial: %s", run+1, c.Runs, im.Name)
		lat, err := serialGo(ctx, d, res[0], c.Serial)
		if err != nil {
			return err
		}
		ps, p50, p99 := latStats(lat)
		serial.set(run, "pairs/s", im.Name, ps)
		serial.set(run, "p50 (ms)", im.Name, p50)
		serial.set(run, "p99 (ms)", im.Name, p99)
		if r.python {
			lat, err := serialPython(ctx, c.Python, d, res[0], c.Serial)
			if err != nil {
				return err
			}
			ps, p50, p99 := latStats(lat)
			serial.set(run, "python3-sanlock pairs/s", im.Name, ps)
			serial.set(run, "python3-sanlock p50 (ms)", im.Name, p50)
			serial.set(run, "python3-sanlock p99 (ms)", im.Name, p99)
		}
		if pprofAddr != "" && run == 0 {
			c.progress("profiling %s under the serial load for %s", im.Name, c.PprofSeconds)
			if err := profileSerial(ctx, d, res[0], pprofAddr, c.PprofDir, c.PprofSeconds); err != nil {
				return err
			}
		}
	}
	if c.has(CaseParallel) {
		c.progress("run %d/%d parallel: %s", run+1, c.Runs, im.Name)
		ps, err := parallelGo(ctx, d, res, c.ParPairs)
		if err != nil {
			return err
		}
		par.set(run, "pairs/s", im.Name, ps)
	}
	if c.has(CaseContention) {
		c.progress("run %d/%d contention: %s", run+1, c.Runs, im.Name)
		if err := contention(ctx, run, d, contRes, c.ContProcs, c.ContDuration, cont); err != nil {
			return err
		}
	}
	if !d.alive() {
		return fmt.Errorf("%s exited during the lease cases: %s", im.Name, d.logTail())
	}
	return nil
}

// serialGo times n acquire+release pairs of res by one registered client.
func serialGo(ctx context.Context, d *daemon, res client.Resource, n int) ([]time.Duration, error) {
	reg, err := d.register()
	if err != nil {
		return nil, err
	}
	defer reg.Close()
	rs := []client.Resource{res}
	lat := make([]time.Duration, 0, n)
	for i := 0; i < n && ctx.Err() == nil; i++ {
		t0 := time.Now()
		if err := acquireRelease(reg, rs); err != nil {
			return nil, fmt.Errorf("%s: %w", d.impl.Name, err)
		}
		lat = append(lat, time.Since(t0))
	}
	return lat, ctx.Err()
}

func acquireRelease(reg *client.Reg, rs []client.Resource) error {
	if err := reg.Acquire(context.Background(), rs, 0, nil); err != nil {
		return fmt.Errorf("acquire %s: %w", rs[0].Name, err)
	}
	if _, err := reg.Release(context.Background(), rs, 0); err != nil {
		return fmt.Errorf("release %s: %w", rs[0].Name, err)
	}
	return nil
}

// pythonSerial is the serial loop in python3-sanlock (libsanlock): argv is
// lockspace, resource, path, offset, pairs; it prints the latencies (s) as
// JSON.
const pythonSerial = `
import json, sys, time, sanlock
ls, rn, path, off, n = sys.argv[1].encode(), sys.argv[2].encode(), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
fd = sanlock.register()
disks = [(path, off)]
lat = []
for _ in range(n):
    t0 = time.perf_counter()
    sanlock.acquire(ls, rn, disks, slkfd=fd)
    sanlock.release(ls, rn, disks, slkfd=fd)
    lat.append(time.perf_counter() - t0)
print(json.dumps(lat))
`

func serialPython(ctx context.Context, py string, d *daemon, res client.Resource, n int) ([]time.Duration, error) {
	cmd := exec.CommandContext(ctx, py, "-c", pythonSerial, res.LockspaceName, res.Name,
		res.Disks[0].Path, strconv.FormatUint(res.Disks[0].Offset, 10), strconv.Itoa(n))
	cmd.Env = append(os.Environ(), "SANLOCK_RUN_DIR="+d.runDir)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		return nil, fmt.Errorf("%s: python3-sanlock serial: %v: %s", d.impl.Name, err, stderr)
	}
	var secs []float64
	if err := json.Unmarshal(out, &secs); err != nil || len(secs) == 0 {
		return nil, fmt.Errorf("python3-sanlock serial: bad output %q", out)
	}
	lat := make([]time.Duration, len(secs))
	for i, s := range secs {
		lat[i] = time.Duration(s * 1e9)
	}
	return lat, nil
}

// parallelGo runs one registered client per resource, pairs each, at once,
// and returns the pairs per second of all of them.
func parallelGo(ctx context.Context, d *daemon, res []client.Resource, pairs int) (float64, error) {
	regs := make([]*client.Reg, len(res))
	for i := range regs {
		reg, err := d.register()
		if err != nil {
			return 0, err
		}
		defer reg.Close()
		regs[i] = reg
	}
	errs := make([]error, len(res))
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs := []client.Resource{res[i]}
			for j := 0; j < pairs && ctx.Err() == nil; j++ {
				if err := acquireRelease(regs[i], rs); err != nil {
					errs[i] = fmt.Errorf("%s: %w", d.impl.Name, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(t0)
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return float64(pairs*len(res)) / el.Seconds(), ctx.Err()
}

// contention runs procs registered clients on d for dur, each acquiring a
// random one of res, releasing it at once, and backing off 0-5 ms after a
// failed acquire.
func contention(ctx context.Context, run int, d *daemon, res []client.Resource, procs int, dur time.Duration, t *Table) error {
	regs := make([]*client.Reg, procs)
	for i := range regs {
		reg, err := d.register()
		if err != nil {
			return err
		}
		defer reg.Close()
		regs[i] = reg
	}
	ok := make([]int, procs)
	tries := make([]int, procs)
	errs := make([]error, procs)
	before, err := sampleProc(d.pid)
	if err != nil {
		return err
	}
	end := time.Now().Add(dur)
	var wg sync.WaitGroup
	for i := range regs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
			for time.Now().Before(end) && ctx.Err() == nil {
				rs := []client.Resource{res[rng.IntN(len(res))]}
				tries[i]++
				if err := regs[i].Acquire(context.Background(), rs, 0, nil); err != nil {
					if fatal(err) {
						errs[i] = fmt.Errorf("%s: acquire: %w", d.impl.Name, err)
						return
					}
					time.Sleep(time.Duration(rng.Int64N(int64(5 * time.Millisecond))))
					continue
				}
				if _, err := regs[i].Release(context.Background(), rs, 0); err != nil {
					errs[i] = fmt.Errorf("%s: release %s: %w", d.impl.Name, rs[0].Name, err)
					return
				}
				ok[i]++
			}
		}()
	}
	wg.Wait()
	after, err := sampleProc(d.pid)
	if err != nil {
		return err
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	el := after.at.Sub(before.at).Seconds()
	total, attempts := sum(ok), sum(tries)
	t.set(run, "pairs/s", d.impl.Name, float64(total)/el)
	t.set(run, "attempts/s", d.impl.Name, float64(attempts)/el)
	t.set(run, "max/min acquisitions per client", d.impl.Name, maxMin(ok))
	t.set(run, "clients that never acquired", d.impl.Name, float64(countZero(ok)))
	t.set(run, "daemon CPU (%)", d.impl.Name, cpuPercent(before, after))
	if attempts > 0 {
		t.set(run, "daemon CPU per attempt (ms)", d.impl.Name, cpuSeconds(before, after)*1000/float64(attempts))
	}
	return nil
}

// fatal reports whether an acquire error is not an answer of a working
// daemon (a broken connection or a malformed reply).
func fatal(err error) bool {
	var e *client.Error
	if !errors.As(err, &e) {
		return true
	}
	switch e.Code {
	case -int(syscall.EPIPE), -int(syscall.ECONNRESET), -int(syscall.ECONNREFUSED), -int(syscall.ENOENT):
		return true
	}
	return false
}

func sum(v []int) int {
	n := 0
	for _, x := range v {
		n += x
	}
	return n
}

func countZero(v []int) int {
	n := 0
	for _, x := range v {
		if x == 0 {
			n++
		}
	}
	return n
}

// maxMin is max(v)/min(v), +Inf when some entry is 0.
func maxMin(v []int) float64 {
	lo, hi := slices.Min(v), slices.Max(v)
	if lo == 0 {
		return math.Inf(1)
	}
	return float64(hi) / float64(lo)
}

// freeLoopbackAddr returns a loopback TCP address that was free a moment ago.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// profileSerial saves a CPU profile of our daemon (SANLOCK_PPROF at addr)
// taken while one client loops acquire+release, then a heap profile.
func profileSerial(ctx context.Context, d *daemon, res client.Resource, addr, dir string, dur time.Duration) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	secs := max(1, int(dur.Seconds()))
	type got struct {
		b   []byte
		err error
	}
	ch := make(chan got, 1)
	go func() {
		b, err := httpGet(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs), dur+30*time.Second)
		ch <- got{b, err}
	}()
	reg, err := d.register()
	if err != nil {
		return err
	}
	defer reg.Close()
	rs := []client.Resource{res}
	pairs := 0
	var prof got
loop:
	for {
		select {
		case prof = <-ch:
			break loop
		default:
		}
		if err := acquireRelease(reg, rs); err != nil {
			return fmt.Errorf("%s (profiling): %w", d.impl.Name, err)
		}
		pairs++
	}
	if prof.err != nil {
		return fmt.Errorf("CPU profile from SANLOCK_PPROF=%s: %w (does this gosanlock support SANLOCK_PPROF?)", addr, prof.err)
	}
	cpuPath := filepath.Join(dir, "gosanlock-serial.cpu.pprof")
	if err := os.WriteFile(cpuPath, prof.b, 0o644); err != nil {
		return err
	}
	heap, err := httpGet(ctx, fmt.Sprintf("http://%s/debug/pprof/heap", addr), 30*time.Second)
	if err != nil {
		return err
	}
	heapPath := filepath.Join(dir, "gosanlock-serial.heap.pprof")
	if err := os.WriteFile(heapPath, heap, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "profiles of gosanlock under %d serial pairs: %s, %s (go tool pprof -top %s)\n", pairs, cpuPath, heapPath, cpuPath)
	return nil
}

func httpGet(ctx context.Context, url string, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s", url, resp.Status)
	}
	return b, err
}
