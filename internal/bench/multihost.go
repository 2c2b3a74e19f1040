package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/gosanlock/gosanlock/client"
)

// multiHostCase: H daemons of one implementation on this machine (each its
// own process, run dir, host name and host_id 1..H) share one lockspace
// file and one resource file. Join all at once, idle, then one client per
// host loops non-blocking acquire -> inquire -> release on the resource,
// waiting a random 0-5 ms after a failed acquire.
func (r *runner) multiHostCase(ctx context.Context) ([]*Table, error) {
	c := &r.cfg
	t := newTable(CaseMultiHost, fmt.Sprintf("H daemons on one lockspace and one resource, io_timeout %d: idle %s (from %s after the joins), then one client per host contends for %s", c.IOTimeout, c.MHIdle, c.MHSettle, c.MHContend), r.cols)
	t.note("idle CPU: sum over the H daemons, %% of one core; daemon CPU per attempt: CPU of all daemons during contention / acquire attempts")
	t.note("max/min: acquisitions of the luckiest host / the unluckiest (inf when some host never got it); the goal is every host at least once and max/min <= 10 at H=32 in 60 s")
	for run := 0; run < c.Runs; run++ {
		for _, h := range c.Hosts {
			for _, im := range r.order(run) {
				c.progress("run %d/%d multihost: %s, H=%d", run+1, c.Runs, im.Name, h)
				if err := r.multiHostRun(ctx, run, im, h, t); err != nil {
					return []*Table{t}, err
				}
			}
		}
	}
	return []*Table{t}, nil
}

func (r *runner) multiHostRun(ctx context.Context, run int, im Impl, h int, t *Table) error {
	c := &r.cfg
	dir, err := r.tempDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	lsPath := filepath.Join(dir, "ls.lease")
	resPath := filepath.Join(dir, "res.lease")
	for _, p := range []string{lsPath, resPath} {
		if err := makeFile(p, mib, true); err != nil {
			return err
		}
	}
	res := []client.Resource{resource(lsName, "MH", resPath, 0)}
	err = withFormatter(ctx, im, func(d *daemon) error {
		if err := formatLockspace(d, lsName, lsPath, c.IOTimeout); err != nil {
			return err
		}
		return formatResource(d, res[0])
	})
	if err != nil {
		return err
	}
	ds := make([]*daemon, 0, h)
	defer func() {
		for _, d := range ds {
			d.stop()
		}
	}()
	for i := range h {
		d, err := startDaemon(ctx, im, []string{"-e", fmt.Sprintf("bench-host-%d", i+1)})
		if err != nil {
			return err
		}
		ds = append(ds, d)
	}
	// Join all at once.
	errs := make([]error, h)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i, d := range ds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = d.join(lsName, lsPath, uint64(i+1), c.IOTimeout)
		}()
	}
	wg.Wait()
	joinSecs := time.Since(t0).Seconds()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	if err := sleepCtx(ctx, c.MHSettle); err != nil {
		return err
	}
	a, err := sampleAll(ds)
	if err != nil {
		return err
	}
	if err := sleepCtx(ctx, c.MHIdle); err != nil {
		return err
	}
	b, err := sampleAll(ds)
	if err != nil {
		return err
	}
	var idleCPU, rss float64
	for i := range ds {
		idleCPU += cpuPercent(a[i], b[i])
		rss += float64(b[i].rss)
	}

	// Contention.
	regs := make([]*client.Reg, h)
	for i, d := range ds {
		reg, err := d.register()
		if err != nil {
			return fmt.Errorf("host %d: %w", i+1, err)
		}
		defer reg.Close()
		regs[i] = reg
	}
	ok := make([]int, h)
	tries := make([]int, h)
	cerrs := make([]error, h)
	before, err := sampleAll(ds)
	if err != nil {
		return err
	}
	end := time.Now().Add(c.MHContend)
	for i := range regs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
			for time.Now().Before(end) && ctx.Err() == nil {
				tries[i]++
				if err := regs[i].Acquire(context.Background(), res, 0, nil); err != nil {
					if fatal(err) {
						cerrs[i] = fmt.Errorf("%s host %d: acquire: %w", im.Name, i+1, err)
						return
					}
					time.Sleep(time.Duration(rng.Int64N(int64(5 * time.Millisecond))))
					continue
				}
				if inq, err := regs[i].Inquire(context.Background()); err != nil || inq.Count != 1 {
					cerrs[i] = fmt.Errorf("%s host %d: inquire while holding: %d leases, %v", im.Name, i+1, inq.Count, err)
					return
				}
				if _, err := regs[i].Release(context.Background(), res, 0); err != nil {
					cerrs[i] = fmt.Errorf("%s host %d: release: %w", im.Name, i+1, err)
					return
				}
				ok[i]++
			}
		}()
	}
	wg.Wait()
	after, err := sampleAll(ds)
	if err != nil {
		return err
	}
	for _, err := range cerrs {
		if err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var cpu float64
	for i := range ds {
		cpu += cpuSeconds(before[i], after[i])
	}
	el := after[0].at.Sub(before[0].at).Seconds()
	p := fmt.Sprintf("H=%d ", h)
	t.set(run, p+"join all (s)", im.Name, joinSecs)
	t.set(run, p+"idle CPU, all daemons (%)", im.Name, idleCPU)
	t.set(run, p+"RSS per daemon (MB)", im.Name, rss/float64(h)/mb)
	t.set(run, p+"acquisitions/s", im.Name, float64(sum(ok))/el)
	t.set(run, p+"hosts that never got it", im.Name, float64(countZero(ok)))
	t.set(run, p+"max/min acquisitions per host", im.Name, maxMin(ok))
	t.set(run, p+"fewest acquisitions of a host", im.Name, float64(slices.Min(ok)))
	t.set(run, p+"most acquisitions of a host", im.Name, float64(slices.Max(ok)))
	c.progress("run %d multihost: %s, H=%d: acquisitions per host (host_id 1..%d): %v; attempts %d", run+1, im.Name, h, h, ok, sum(tries))
	if n := sum(tries); n > 0 {
		t.set(run, p+"daemon CPU per attempt (ms)", im.Name, cpu*1000/float64(n))
	}
	return nil
}
