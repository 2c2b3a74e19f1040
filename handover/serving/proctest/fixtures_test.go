package proctest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/daemon"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/diskio"
	"github.com/gosanlock/gosanlock/internal/testutil"
	"github.com/gosanlock/gosanlock/wire"
)

// procDaemon is our binary running as a daemon process in its own run
// directory.
type procDaemon struct {
	t   *testing.T
	bin string
	dir string
	cl  *client.Client
}

func startProcDaemon(t *testing.T, args ...string) *procDaemon {
	t.Helper()
	return startProcDaemonEnv(t, nil, args...)
}

// startProcDaemonEnv is startProcDaemon with env added to the daemon's
// environment.
func startProcDaemonEnv(t *testing.T, env []string, args ...string) *procDaemon {
	t.Helper()
	return startProcDaemonBin(t, reexecBinary(t), env, args...)
}

// startProcDaemonBin is startProcDaemonEnv running a copy of the binary
// src.
func startProcDaemonBin(t *testing.T, src string, env []string, args ...string) *procDaemon {
	t.Helper()
	good, err := os.ReadFile(src)
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "sanlock")
	require.NoError(t, os.WriteFile(bin, good, 0o755))
	d := &procDaemon{t: t, bin: bin, dir: testutil.ShortTempDir(t)}
	logf, err := os.Create(filepath.Join(d.dir, "daemon.out"))
	require.NoError(t, err)
	t.Cleanup(func() { logf.Close() })
	cmd := startBusy(t, func() *exec.Cmd {
		cmd := exec.Command(bin, append([]string{"daemon", "-D", "-l", "0"}, args...)...)
		cmd.Env = append(append(os.Environ(), "SANLOCK_RUN_DIR="+d.dir, "SANLOCK_PRIVILEGED=0"), env...)
		cmd.Stdout, cmd.Stderr = logf, logf
		return cmd
	})
	go func() { _ = cmd.Wait() }()
	t.Cleanup(func() {
		if p := d.pid(); p > 0 {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(d.dir, "daemon.out"))
			t.Logf("daemon output:\n%s", b)
		}
	})
	require.Eventually(t, func() bool {
		var err error
		d.cl, err = client.Dial(d.dir)
		if err != nil {
			return false
		}
		_, _, err = d.cl.Version(context.Background())
		return err == nil && d.pid() == cmd.Process.Pid
	}, 30*time.Second, 20*time.Millisecond)
	d.cl.Timeout = 30 * time.Second
	return d
}

func (d *procDaemon) pid() int {
	b, _ := os.ReadFile(filepath.Join(d.dir, daemon.PidFileName))
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// run runs our binary as a client of the daemon.
func (d *procDaemon) run(args ...string) (string, error) {
	cmd := exec.Command(d.bin, args...)
	cmd.Env = append(os.Environ(), "SANLOCK_RUN_DIR="+d.dir, "SANLOCK_PRIVILEGED=0")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// reexec sends SIGUSR1 and waits until another image serves.
func (d *procDaemon) reexec() (old, now int) {
	t := d.t
	t.Helper()
	old = d.pid()
	require.NoError(t, syscall.Kill(old, syscall.SIGUSR1))
	// The new image truncates the pid file before it writes its pid: a
	// read in between gives 0.
	require.Eventually(t, func() bool {
		now = d.pid()
		return now != 0 && now != old && gone(old)
	}, 20*time.Second, 5*time.Millisecond)
	return old, now
}

// failures counts the failed reexecs in the daemon's output.
func (d *procDaemon) failures() int {
	b, _ := os.ReadFile(filepath.Join(d.dir, "daemon.out"))
	return strings.Count(string(b), "reexec failed: ")
}

// spaceStatus is what `sanlock client status -D` says of a lockspace.
func (d *procDaemon) spaceStatus(name string) map[string]string {
	t := d.t
	t.Helper()
	out, err := d.run("client", "status", "-D")
	require.NoError(t, err, out)
	st := map[string]string{}
	in := false
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "s ") {
			in = strings.HasPrefix(line, "s "+name+":")
			continue
		}
		if !strings.HasPrefix(line, "    ") {
			in = false
		}
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); in && ok {
			st[k] = v
		}
	}
	require.NotEmpty(t, st, "lockspace %s in:\n%s", name, out)
	return st
}

var renewalTS = regexp.MustCompile(`(?m)^timestamp=(\d+) `)

// renewals is the renewal history `sanlock client renewal` prints.
func (d *procDaemon) renewals(name string) []uint64 {
	t := d.t
	t.Helper()
	out, err := d.run("client", "renewal", "-s", name)
	require.NoError(t, err, out)
	var ts []uint64
	for _, m := range renewalTS.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.ParseUint(m[1], 10, 64)
		ts = append(ts, n)
	}
	return ts
}

// lockspaceFile is a lease file holding lockspace LS (io_timeout 1) and
// n resources R0.. after it.
func lockspaceFile(t *testing.T, n int) string {
	t.Helper()
	path := testutil.LeaseFile(t, int64(n+1)<<20)
	dev, err := diskio.OpenFile(path)
	require.NoError(t, err)
	defer dev.Close()
	ctx := context.Background()
	require.NoError(t, diskfmt.WriteLockspace(ctx, dev, 0, 0, "LS", 1, 0))
	for i := 0; i < n; i++ {
		g, err := diskfmt.GeometryForWrite(0, dev.SectorSize())
		require.NoError(t, err)
		require.NoError(t, diskfmt.WriteResource(ctx, []diskfmt.ResourceDisk{{Dev: dev, Offset: int64(i+1) << 20}}, 0,
			diskfmt.PaxosInit{Geometry: g, SpaceName: "LS", ResourceName: "R" + strconv.Itoa(i)}))
	}
	return path
}

// twoHosts starts two of our daemons joined to one lockspace "LS" at
// io_timeout 1, as host_ids 1 and 2.
func twoHosts(t *testing.T) (d1, d2 *procDaemon) {
	d1 = startProcDaemon(t, "-w", "0")
	d2 = startProcDaemon(t, "-w", "0")
	path := lockspaceFile(t, 0)
	ls1 := &wire.Lockspace{Name: "LS", HostID: 1, Disk: wire.Disk{Path: path}}
	ls2 := &wire.Lockspace{Name: "LS", HostID: 2, Disk: wire.Disk{Path: path}}
	require.NoError(t, d1.cl.AddLockspace(context.Background(), ls1, wire.AddAsync, 1))
	require.NoError(t, d2.cl.AddLockspace(context.Background(), ls2, 0, 1))
	require.NoError(t, d1.cl.InqLockspace(context.Background(), ls1, wire.InqWait))
	return d1, d2
}

// leaseFixture is the holder setup of the reexec lease tests: lockspace LS
// (host_id 1), a registered holder of R0 (EX) and R1 (SH) whose inquire
// answer is state, and orphans: persistent leases of a client that closed.
type leaseFixture struct {
	t       *testing.T
	d       *procDaemon
	res     func(i int, flags uint32) wire.Resource
	holder  *client.Reg
	state   string
	orphans []orphanSpec
}

// orphanSpec is an orphan of a leaseFixture: R<i>, with flags besides
// persistent.
type orphanSpec struct {
	i     int
	flags uint32
}

// newLeaseFixture sets the fixture up on path and waits until status
// lists the orphans.
func newLeaseFixture(t *testing.T, d *procDaemon, path string, orphans []orphanSpec) *leaseFixture {
	t.Helper()
	ls := &wire.Lockspace{Name: "LS", HostID: 1, Disk: wire.Disk{Path: path}}
	require.NoError(t, d.cl.AddLockspace(context.Background(), ls, 0, 1))
	f := &leaseFixture{t: t, d: d, orphans: orphans, res: func(i int, flags uint32) wire.Resource {
		return wire.Resource{LockspaceName: "LS", Name: "R" + strconv.Itoa(i), Flags: flags,
			Disks: []wire.Disk{{Path: path, Offset: uint64(i+1) << 20}}}
	}}
	var err error
	f.holder, err = d.cl.Register(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { f.holder.Close() })
	require.NoError(t, f.holder.Acquire(context.Background(), []wire.Resource{f.res(0, 0), f.res(1, wire.ResShared)}, 0, nil))
	var n int
	inq, ierr := f.holder.Inquire(context.Background())
	f.state, n, err = inq.State, inq.Count, ierr
	require.NoError(t, err)
	require.Equal(t, 2, n)
	gone, err := d.cl.Register(context.Background())
	require.NoError(t, err)
	var rs []wire.Resource
	for _, o := range orphans {
		rs = append(rs, f.res(o.i, wire.ResPersistent|o.flags))
	}
	require.NoError(t, gone.Acquire(context.Background(), rs, 0, nil))
	gone.Close()
	require.Eventually(t, f.orphaned, 10*time.Second, 50*time.Millisecond)
	return f
}

// orphaned reports whether status lists exactly the fixture's orphans.
func (f *leaseFixture) orphaned() bool {
	out, err := f.d.run("client", "status", "-D")
	require.NoError(f.t, err, out)
	if strings.Count(out, "list=orphan") != len(f.orphans) {
		return false
	}
	for _, o := range f.orphans {
		if !strings.Contains(out, "LS:R"+strconv.Itoa(o.i)+":") {
			return false
		}
	}
	return true
}

// hasClient reports whether the daemon's status lists a registered client
// with pid.
func (d *procDaemon) hasClient(t *testing.T, pid int) bool {
	t.Helper()
	recs, err := d.cl.Status(context.Background(), 0)
	require.NoError(t, err)
	for _, r := range recs {
		if r.Type == wire.StateClient && r.Data32 == uint32(pid) {
			return true
		}
	}
	return false
}

// logCount counts s in the daemon's output.
func (d *procDaemon) logCount(s string) int {
	b, _ := os.ReadFile(filepath.Join(d.dir, "daemon.out"))
	return strings.Count(string(b), s)
}

// gone reports whether pid has exited (a zombie counts as gone: its
// parent, an earlier image, has exited too).
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// reexecBinary is our sanlock binary (testutil.SanlockBinary).
func reexecBinary(t *testing.T) string { return testutil.SanlockBinary(t) }

// startBusy starts the command mk makes, again while the binary it names
// is busy (ETXTBSY): a binary just written can be held open for writing
// for a moment by a child that another test's fork made meanwhile, until
// that child execs.
func startBusy(t *testing.T, mk func() *exec.Cmd) *exec.Cmd {
	t.Helper()
	for i := 0; ; i++ {
		cmd := mk()
		err := cmd.Start()
		if err == nil {
			return cmd
		}
		if !errors.Is(err, syscall.ETXTBSY) || i == 100 {
			require.NoError(t, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
