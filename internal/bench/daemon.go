package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gosanlock/gosanlock/client"
)

// Impl is one daemon implementation under test.
type Impl struct {
	Name string // column name: "sanlock-3.8.5" or "gosanlock"
	Bin  string // executable
	Ours bool   // gosanlock (pprof support)
}

// daemon is one running daemon process in its own run directory.
type daemon struct {
	impl   Impl
	runDir string
	cmd    *exec.Cmd
	pid    int
	cl     *client.Client
	done   chan struct{}
	log    *os.File
}

// startDaemon starts impl in a fresh run directory (SANLOCK_RUN_DIR) with
// `daemon -D -w 0 -l 0 -U root -G root` plus extra arguments, and waits for
// its socket. env adds variables (e.g. SANLOCK_PPROF).
func startDaemon(ctx context.Context, impl Impl, extra []string, env ...string) (*daemon, error) {
	runDir, err := os.MkdirTemp("", "slbench-run-")
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(runDir, "stderr.log"))
	if err != nil {
		os.RemoveAll(runDir)
		return nil, err
	}
	args := append([]string{"daemon", "-D", "-w", "0", "-l", "0", "-U", "root", "-G", "root"}, extra...)
	cmd := exec.Command(impl.Bin, args...)
	cmd.Args[0] = "sanlock"
	cmd.Env = append(os.Environ(), "SANLOCK_RUN_DIR="+runDir, "SANLOCK_PRIVILEGED=0")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		os.RemoveAll(runDir)
		return nil, fmt.Errorf("start %s: %w", impl.Bin, err)
	}
	d := &daemon{impl: impl, runDir: runDir, cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{}), log: logf}
	go func() { _ = cmd.Wait(); close(d.done) }()
	d.cl, err = client.Dial(runDir)
	if err != nil {
		d.stop()
		return nil, err
	}
	sock := filepath.Join(runDir, client.SockName)
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.Dial("unix", sock)
		if err == nil {
			c.Close()
			return d, nil
		}
		select {
		case <-d.done:
			out := d.logTail()
			d.stop()
			return nil, fmt.Errorf("%s exited at start: %s", impl.Name, out)
		case <-ctx.Done():
			d.stop()
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			out := d.logTail()
			d.stop()
			return nil, fmt.Errorf("%s did not open its socket: %s", impl.Name, out)
		}
	}
}

// logTail returns the end of the daemon's stderr, for error messages.
func (d *daemon) logTail() string {
	b, _ := os.ReadFile(d.log.Name())
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// stop kills the daemon (SIGKILL: every lease file of a run is fresh, so
// leaving delta leases behind is harmless) and removes its run directory.
func (d *daemon) stop() {
	if d == nil || d.cmd == nil {
		return
	}
	_ = d.cmd.Process.Kill()
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
	}
	d.log.Close()
	os.RemoveAll(d.runDir)
	d.cmd = nil
}

// alive reports whether the daemon is still running.
func (d *daemon) alive() bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// join adds lockspace name at disk (path, offset 0) with hostID and the
// given io_timeout (always explicit: 3.8.5 ignores `daemon -o`). Many
// add_lockspace sent at once fill the daemon's small listen backlog: the
// client's dial waits for room as libsanlock's blocking connect does.
func (d *daemon) join(name, path string, hostID uint64, ioTimeout uint32) error {
	ls := &client.Lockspace{Name: name, HostID: hostID, Disk: client.Disk{Path: path}}
	if err := d.cl.AddLockspace(context.Background(), ls, 0, ioTimeout); err != nil {
		return fmt.Errorf("%s: add_lockspace %s host_id %d: %w (%s)", d.impl.Name, name, hostID, err, d.logTail())
	}
	return nil
}

// busy reports EAGAIN (from the daemon's reply).
func busy(err error) bool { return errors.Is(err, syscall.EAGAIN) }

// retryBusy runs fn until it does not fail with EAGAIN. Only for
// idempotent calls.
func (d *daemon) retryBusy(fn func() error) error {
	for {
		err := fn()
		if !busy(err) || !d.alive() {
			return err
		}
		time.Sleep(time.Millisecond)
	}
}

// register is client.Register (whose dial waits while the listen backlog
// is full).
func (d *daemon) register() (*client.Reg, error) {
	reg, err := d.cl.Register(context.Background())
	if err != nil {
		return nil, fmt.Errorf("%s: register: %w", d.impl.Name, err)
	}
	return reg, nil
}

// procStat is a sample of a process's CPU time and resident memory.
type procStat struct {
	at    time.Time
	ticks uint64 // utime + stime, clock ticks (includes exited threads)
	rss   uint64 // VmRSS, bytes
	// taskNs is the run time of each live thread in ns, from
	// /proc/PID/task/TID/schedstat: finer than ticks, but blind to threads
	// that exit between two samples.
	taskNs map[int]uint64
}

// clockTick is USER_HZ, 100 on every Linux architecture we run on.
const clockTick = 100

// sampleProc reads /proc/PID/stat (utime, stime) and /proc/PID/status
// (VmRSS).
func sampleProc(pid int) (procStat, error) {
	s := procStat{at: time.Now()}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: state is field 3, utime 14, stime 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return s, errors.New("bad /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return s, errors.New("short /proc stat")
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return s, errors.New("bad utime/stime in /proc stat")
	}
	s.ticks = ut + st
	s.taskNs = taskRunTimes(pid)
	b, err = os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) >= 1 {
				kb, _ := strconv.ParseUint(f[0], 10, 64)
				s.rss = kb * 1024
			}
		}
	}
	return s, nil
}

// taskRunTimes reads the first field of /proc/PID/task/*/schedstat (nil if
// unavailable).
func taskRunTimes(pid int) map[int]uint64 {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	m := make(map[int]uint64, len(ents))
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "schedstat"))
		if err != nil {
			return nil
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return nil
		}
		ns, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return nil
		}
		m[tid] = ns
	}
	return m
}

// cpuSeconds is the CPU time used between two samples: from the threads'
// schedstat when no thread exited in between (ns resolution), else from
// utime+stime (10 ms resolution, but counts exited threads).
func cpuSeconds(a, b procStat) float64 {
	if a.taskNs != nil && b.taskNs != nil {
		var ns uint64
		exact := true
		for tid, t0 := range a.taskNs {
			t1, ok := b.taskNs[tid]
			if !ok || t1 < t0 {
				exact = false
				break
			}
			ns += t1 - t0
		}
		if exact {
			for tid, t1 := range b.taskNs {
				if _, ok := a.taskNs[tid]; !ok {
					ns += t1 // started in between
				}
			}
			return float64(ns) / 1e9
		}
	}
	return float64(b.ticks-a.ticks) / clockTick
}

// cpuPercent is the CPU used between two samples, in percent of one core.
func cpuPercent(a, b procStat) float64 {
	wall := b.at.Sub(a.at).Seconds()
	if wall <= 0 {
		return 0
	}
	return cpuSeconds(a, b) / wall * 100
}

// sampleAll samples every daemon; the first error wins.
func sampleAll(ds []*daemon) ([]procStat, error) {
	out := make([]procStat, len(ds))
	for i, d := range ds {
		s, err := sampleProc(d.pid)
		if err != nil {
			return nil, fmt.Errorf("%s pid %d: %w", d.impl.Name, d.pid, err)
		}
		out[i] = s
	}
	return out, nil
}

// sleepCtx sleeps d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

const mib = 1 << 20
