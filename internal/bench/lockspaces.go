package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gosanlock/gosanlock/client"
)

const mb = 1e6

// lockspaceGroup runs the idle case (CPU and RSS of a daemon with a small
// and a large set of joined idle lockspaces) and the join case (time to
// join the large set, all added at once); the large set serves both.
func (r *runner) lockspaceGroup(ctx context.Context) ([]*Table, error) {
	c := &r.cfg
	idle := newTable(CaseIdle, fmt.Sprintf("daemon with joined idle lockspaces (one 1 MiB file each, host_id 1): CPU over %s / %s windows, RSS at the end", c.IdleWindow, c.IdleLargeWindow), r.cols)
	idle.note("CPU over the window in %% of one core, from /proc/PID/task/*/schedstat (utime+stime of /proc/PID/stat if a thread exited); RSS: VmRSS of /proc/PID/status at the end; window starts %s after the last join", c.IdleSettle)
	join := newTable(CaseJoin, "time until every add_lockspace of a set sent at once (one connection each) has returned", r.cols)
	for run := 0; run < c.Runs; run++ {
		for _, im := range r.order(run) {
			if c.has(CaseIdle) {
				c.progress("run %d/%d idle: %s, %d lockspaces at io_timeout %d", run+1, c.Runs, im.Name, c.IdleSmall, c.IdleSmallTimeout)
				if err := r.lockspaceSet(ctx, run, im, c.IdleSmall, c.IdleSmallTimeout, c.IdleWindow, idle, join); err != nil {
					return []*Table{idle, join}, err
				}
			}
			c.progress("run %d/%d idle/join: %s, %d lockspaces at io_timeout %d", run+1, c.Runs, im.Name, c.IdleLarge, c.IdleLargeTimeout)
			window := c.IdleLargeWindow
			if !c.has(CaseIdle) {
				window = 0
			}
			if err := r.lockspaceSet(ctx, run, im, c.IdleLarge, c.IdleLargeTimeout, window, idle, join); err != nil {
				return []*Table{idle, join}, err
			}
		}
	}
	var out []*Table
	if c.has(CaseIdle) {
		out = append(out, idle)
	}
	if c.has(CaseJoin) || c.has(CaseIdle) {
		out = append(out, join)
	}
	return out, nil
}

// lockspaceSet joins n lockspaces at once on a fresh daemon of im, records
// the join time, then (window > 0) the idle CPU and RSS.
func (r *runner) lockspaceSet(ctx context.Context, run int, im Impl, n int, ioTimeout uint32, window time.Duration, idle, join *Table) error {
	dir, err := r.tempDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	paths := make([]string, n)
	for i := range paths {
		paths[i] = filepath.Join(dir, fmt.Sprintf("ls%d.lease", i))
		if err := makeFile(paths[i], mib, true); err != nil {
			return err
		}
	}
	name := func(i int) string { return fmt.Sprintf("LS%d", i) }
	err = withFormatter(ctx, im, func(d *daemon) error {
		for i, p := range paths {
			if err := formatLockspace(d, name(i), p, ioTimeout); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	d, err := startDaemon(ctx, im, nil)
	if err != nil {
		return err
	}
	defer d.stop()
	secs, err := joinAll(d, n, func(i int) (string, string, uint64) { return name(i), paths[i], 1 }, ioTimeout)
	if err != nil {
		return err
	}
	set := fmt.Sprintf("%d lockspaces, io_timeout %d", n, ioTimeout)
	join.set(run, fmt.Sprintf("join %s (s)", set), im.Name, secs)
	if window <= 0 {
		return nil
	}
	if err := sleepCtx(ctx, r.cfg.IdleSettle); err != nil {
		return err
	}
	a, err := sampleProc(d.pid)
	if err != nil {
		return err
	}
	if err := sleepCtx(ctx, window); err != nil {
		return err
	}
	b, err := sampleProc(d.pid)
	if err != nil {
		return err
	}
	if !d.alive() {
		return fmt.Errorf("%s exited while idle: %s", im.Name, d.logTail())
	}
	idle.set(run, set+": CPU (%)", im.Name, cpuPercent(a, b))
	idle.set(run, set+": RSS (MB)", im.Name, float64(b.rss)/mb)
	return nil
}

// joinAll sends n add_lockspace at once to d, each on its own connection,
// and returns the seconds until the last one returned.
func joinAll(d *daemon, n int, ls func(i int) (name, path string, hostID uint64), ioTimeout uint32) (float64, error) {
	errs := make([]error, n)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name, path, id := ls(i)
			errs[i] = d.join(name, path, id, ioTimeout)
		}()
	}
	wg.Wait()
	el := time.Since(t0).Seconds()
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return el, nil
}

// heldCase: one client holds Held leases (one file, 1 MiB apart, sparse
// apart from what formatting wrote): RSS growth per held lease and the CPU
// while holding them.
func (r *runner) heldCase(ctx context.Context) ([]*Table, error) {
	c := &r.cfg
	t := newTable(CaseHeld, fmt.Sprintf("one registered client holds %d EX leases (one file, 1 MiB apart), lockspace io_timeout %d; CPU over %s while holding", c.Held, c.IOTimeout, c.HeldWindow), r.cols)
	t.note("RSS before: after joining, before the first acquire; growth = (RSS holding - RSS before) / leases")
	t.note("the lease file is sparse apart from what formatting wrote (a written file would cost %d MiB of writes per daemon)", c.Held)
	for run := 0; run < c.Runs; run++ {
		for _, im := range r.order(run) {
			c.progress("run %d/%d held: %s, %d leases", run+1, c.Runs, im.Name, c.Held)
			if err := r.heldRun(ctx, run, im, t); err != nil {
				return []*Table{t}, err
			}
		}
	}
	return []*Table{t}, nil
}

func (r *runner) heldRun(ctx context.Context, run int, im Impl, t *Table) error {
	c := &r.cfg
	dir, err := r.tempDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	lsPath := filepath.Join(dir, "ls.lease")
	resPath := filepath.Join(dir, "held.lease")
	if err := makeFile(lsPath, mib, true); err != nil {
		return err
	}
	if err := makeFile(resPath, int64(c.Held)*mib, false); err != nil {
		return err
	}
	res := make([]client.Resource, c.Held)
	for i := range res {
		res[i] = resource(lsName, fmt.Sprintf("H%d", i), resPath, uint64(i)*mib)
	}
	err = withFormatter(ctx, im, func(d *daemon) error {
		if err := formatLockspace(d, lsName, lsPath, c.IOTimeout); err != nil {
			return err
		}
		for _, x := range res {
			if err := formatResource(d, x); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	d, err := startDaemon(ctx, im, nil)
	if err != nil {
		return err
	}
	defer d.stop()
	if err := d.join(lsName, lsPath, 1, c.IOTimeout); err != nil {
		return err
	}
	if err := sleepCtx(ctx, c.IdleSettle); err != nil {
		return err
	}
	before, err := sampleProc(d.pid)
	if err != nil {
		return err
	}
	reg, err := d.register()
	if err != nil {
		return err
	}
	defer reg.Close()
	t0 := time.Now()
	for i := range res {
		if err := reg.Acquire(context.Background(), res[i:i+1], 0, nil); err != nil {
			return fmt.Errorf("%s: acquire lease %d of %d: %w", im.Name, i+1, len(res), err)
		}
	}
	acqSecs := time.Since(t0).Seconds()
	if err := sleepCtx(ctx, c.IdleSettle); err != nil {
		return err
	}
	a, err := sampleProc(d.pid)
	if err != nil {
		return err
	}
	if err := sleepCtx(ctx, c.HeldWindow); err != nil {
		return err
	}
	b, err := sampleProc(d.pid)
	if err != nil {
		return err
	}
	if inq, err := reg.Inquire(context.Background()); err != nil || inq.Count != len(res) {
		return fmt.Errorf("%s: inquire after holding: %d leases, %v", im.Name, inq.Count, err)
	}
	t.set(run, "acquire all, one by one (s)", im.Name, acqSecs)
	t.set(run, "RSS before (MB)", im.Name, float64(before.rss)/mb)
	t.set(run, "RSS holding (MB)", im.Name, float64(b.rss)/mb)
	t.set(run, "RSS growth per held lease (KiB)", im.Name, (float64(b.rss)-float64(before.rss))/1024/float64(len(res)))
	t.set(run, "CPU holding (%)", im.Name, cpuPercent(a, b))
	return nil
}
