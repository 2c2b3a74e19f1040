package daemon

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/internal/testutil"
	"github.com/gosanlock/gosanlock/rescode"
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
	cmd := exec.Command(bin, append([]string{"daemon", "-D", "-l", "0"}, args...)...)
	cmd.Env = append(append(os.Environ(), "SANLOCK_RUN_DIR="+d.dir, "SANLOCK_PRIVILEGED=0"), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
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
		_, _, err = d.cl.Version()
		return err == nil && d.pid() == cmd.Process.Pid
	}, 30*time.Second, 20*time.Millisecond)
	d.cl.Timeout = 30 * time.Second
	return d
}

func (d *procDaemon) pid() int {
	b, _ := os.ReadFile(filepath.Join(d.dir, PidFileName))
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
	dev, err := diskfmt.OpenFile(path)
	require.NoError(t, err)
	defer dev.Close()
	ctx := context.Background()
	require.NoError(t, diskfmt.WriteLockspace(ctx, dev, 0, 0, "LS", 1))
	for i := 0; i < n; i++ {
		g, err := diskfmt.GeometryForWrite(0, dev.SectorSize())
		require.NoError(t, err)
		require.NoError(t, diskfmt.WriteResource(ctx, []diskfmt.ResourceDisk{{Dev: dev, Offset: int64(i+1) << 20}}, 0,
			diskfmt.PaxosInit{Geometry: g, SpaceName: "LS", ResourceName: "R" + strconv.Itoa(i)}))
	}
	return path
}

// TestReexecLockspaceProcess: a daemon joined to a lockspace (io_timeout
// 1: a renewal every 2 s) reexecs several times; `sanlock client status`
// shows the same generation and acquire time after each, the renewal
// history goes on in the new image without a gap over the renewal
// interval (+1 s of whole-second rounding), and the lease on disk keeps
// its generation. A reexec whose new image fails after the old one has
// paused its renewals (it cannot open the lockspace's disk) leaves the
// old image renewing.
func TestReexecLockspaceProcess(t *testing.T) {
	t.Parallel()
	d := startProcDaemon(t, "-w", "0")
	path := lockspaceFile(t, 0)
	ls := &wire.Lockspace{Name: "LS", HostID: 1, Disk: wire.Disk{Path: path}}
	require.NoError(t, d.cl.AddLockspace(ls, 0, 1))
	// The SET_CONFIG flags are handed over too.
	require.NoError(t, d.cl.SetConfig("LS", wire.ConfigUsed))
	require.NoError(t, d.cl.SetConfig("LS", wire.ConfigUsedByOrphans))
	before := d.spaceStatus("LS")
	assert.Equal(t, "1", before["host_generation"])
	assert.Equal(t, "1", before["external_used"])
	assert.Equal(t, "1", before["used_by_orphans"])

	checkHistory := func() []uint64 {
		t.Helper()
		ts := d.renewals("LS")
		require.NotEmpty(t, ts)
		for i := 1; i < len(ts); i++ {
			assert.LessOrEqual(t, ts[i]-ts[i-1], uint64(3), "renewal gap at %d: %v", i, ts)
		}
		return ts
	}
	for i := 0; i < 5; i++ {
		time.Sleep(time.Duration(i*700) * time.Millisecond) // different phases of the renewal
		old, now := d.reexec()
		require.NotEqual(t, old, now)
		st := d.spaceStatus("LS")
		for _, k := range []string{"host_generation", "acquire_last_success", "io_timeout", "list",
			"external_used", "used_by_orphans"} {
			assert.Equal(t, before[k], st[k], k)
		}
		checkHistory()
	}
	// Renewals go on in the last image.
	last := checkHistory()
	require.Eventually(t, func() bool {
		ts := d.renewals("LS")
		return ts[len(ts)-1] > last[len(last)-1]
	}, 10*time.Second, 100*time.Millisecond)

	// The new image cannot open the disk: it fails after COMMIT (the old
	// image had paused its renewals), and the old image renews on.
	require.NoError(t, os.Rename(path, path+".away"))
	p, n := d.pid(), d.failures()
	require.NoError(t, syscall.Kill(p, syscall.SIGUSR1))
	require.Eventually(t, func() bool { return d.failures() > n }, 20*time.Second, 20*time.Millisecond)
	require.NoError(t, os.Rename(path+".away", path))
	assert.Equal(t, p, d.pid())
	out, _ := os.ReadFile(filepath.Join(d.dir, "daemon.out"))
	assert.Contains(t, string(out), "failed at commit", "the failure came after the quiesce")
	last = checkHistory()
	require.Eventually(t, func() bool {
		ts := d.renewals("LS")
		return ts[len(ts)-1] > last[len(last)-1]
	}, 10*time.Second, 100*time.Millisecond)
	checkHistory()

	// The lease on disk: ours, generation 1, live.
	dev, err := diskfmt.OpenFile(path)
	require.NoError(t, err)
	defer dev.Close()
	g, _ := diskfmt.LookupGeometry(512, diskfmt.Align1M)
	ld, _, err := diskfmt.ReadDeltaLeader(context.Background(), dev, 0, g, "LS", 1)
	require.NoError(t, err)
	assert.EqualValues(t, 1, ld.OwnerGeneration)
	assert.NotZero(t, ld.Timestamp)

	// A clean leave still releases (once no longer used externally).
	require.NoError(t, d.cl.SetConfig("LS", wire.ConfigUnused))
	require.NoError(t, d.cl.RemLockspace(ls, 0))
	ld, _, err = diskfmt.ReadDeltaLeader(context.Background(), dev, 0, g, "LS", 1)
	require.NoError(t, err)
	assert.Zero(t, ld.Timestamp)
}

// TestReexecLeasesProcess: a holder with R0 (EX) and R1 (SH) and two
// orphans (R2 EX and R4 SH, persistent, their holder gone) go through
// several reexecs:
// the holder's inquire answer (lver included) is unchanged on its old
// connection, the orphan is still listed, another client can neither take
// R0 nor R2 but acquires and releases R3, and in the end the holder
// releases its leases on the last image.
func TestReexecLeasesProcess(t *testing.T) {
	t.Parallel()
	d := startProcDaemon(t, "-w", "0")
	f := newLeaseFixture(t, d, lockspaceFile(t, 5), []orphanSpec{{2, 0}, {4, wire.ResShared}})
	res, holder, state, orphaned := f.res, f.holder, f.state, f.orphaned
	var err error
	var n int

	check := func() {
		t.Helper()
		got, n, err := holder.Inquire()
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		assert.Equal(t, state, got)
		assert.True(t, orphaned(), "orphan R2 listed")
		other, err := d.cl.Register()
		require.NoError(t, err)
		defer other.Close()
		assert.Error(t, other.Acquire([]wire.Resource{res(0, 0)}, 0, nil), "R0 is held")
		assert.Error(t, other.Acquire([]wire.Resource{res(2, 0)}, 0, nil), "R2 is an orphan")
		assert.Error(t, other.Acquire([]wire.Resource{res(4, 0)}, 0, nil), "R4 is an SH orphan")
		require.NoError(t, other.Acquire([]wire.Resource{res(3, 0), res(1, wire.ResShared)}, 0, nil))
		_, err = other.Release(nil, wire.RelAll)
		require.NoError(t, err)
	}
	check()
	before := d.spaceStatus("LS")
	for i := 0; i < 5; i++ {
		time.Sleep(time.Duration(i*500) * time.Millisecond)
		d.reexec()
		check()
		assert.Equal(t, before["host_generation"], d.spaceStatus("LS")["host_generation"])
	}
	ts := d.renewals("LS")
	for i := 1; i < len(ts); i++ {
		assert.LessOrEqual(t, ts[i]-ts[i-1], uint64(3), "renewal gap at %d: %v", i, ts)
	}
	// The leases are still released normally by the last image.
	_, err = holder.Release(nil, wire.RelAll)
	require.NoError(t, err)
	_, n, err = holder.Inquire()
	require.NoError(t, err)
	assert.Zero(t, n)
	other, err := d.cl.Register()
	require.NoError(t, err)
	defer other.Close()
	require.NoError(t, other.Acquire([]wire.Resource{res(0, 0)}, 0, nil))
}

// twoHosts starts two of our daemons joined to one lockspace "LS" at
// io_timeout 1, as host_ids 1 and 2.
func twoHosts(t *testing.T) (d1, d2 *procDaemon) {
	d1 = startProcDaemon(t, "-w", "0")
	d2 = startProcDaemon(t, "-w", "0")
	path := lockspaceFile(t, 0)
	ls1 := &wire.Lockspace{Name: "LS", HostID: 1, Disk: wire.Disk{Path: path}}
	ls2 := &wire.Lockspace{Name: "LS", HostID: 2, Disk: wire.Disk{Path: path}}
	require.NoError(t, d1.cl.AddLockspace(ls1, wire.AddAsync, 1))
	require.NoError(t, d2.cl.AddLockspace(ls2, 0, 1))
	require.NoError(t, d1.cl.InqLockspace(ls1, wire.InqWait))
	return d1, d2
}

// TestReexecEventListenerProcess: an event listener (REG_EVENT) of a
// lockspace that two daemons share survives several reexecs of its
// daemon on the same connection: nothing is pending or closed after them,
// an event the other host sets reaches it from the last image, and
// END_EVENT works there.
func TestReexecEventListenerProcess(t *testing.T) {
	t.Parallel()
	d1, d2 := twoHosts(t)
	ev, err := d1.cl.RegEvent("LS")
	require.NoError(t, err)
	defer ev.Conn().Close()
	for i := 0; i < 3; i++ {
		time.Sleep(time.Duration(i*600) * time.Millisecond)
		old, now := d1.reexec()
		require.NotEqual(t, old, now)
		_, err = ev.GetEvent()
		require.Equal(t, rescode.RvEAGAIN, testutil.Code(err), "listener open, nothing pending: %v", err)
	}
	assert.Zero(t, d1.failures())
	require.NoError(t, d2.cl.SetEvent("LS", wire.HostEvent{HostID: 1, Event: 0x77, Data: 0x99}, 0))
	cb, err := ev.WaitEvent(20 * time.Second)
	require.NoError(t, err)
	assert.Equal(t, wire.HostEvent{HostID: 1, Event: 0x77, Data: 0x99}, cb.HostEvent)
	assert.Equal(t, uint64(2), cb.FromHostID)
	require.NoError(t, d1.cl.EndEvent(ev))
}

// The host table changes hands with its lockspace (docs/upgrade.md
// "Adopting lockspaces"): right after each reexec of host 1's daemon,
// host 2 is LIVE there (a rebuilt table would answer -EAGAIN, then
// UNKNOWN for 8 x io_timeout) and its host_status record keeps its owner,
// generation and times, which only move forward.
func TestReexecHostTableProcess(t *testing.T) {
	t.Parallel()
	d1, _ := twoHosts(t)
	live := func() bool {
		h, err := d1.cl.GetHosts("LS", 2)
		return err == nil && len(h) == 1 && h[0].State() == wire.HostLive
	}
	require.Eventually(t, live, 40*time.Second, 100*time.Millisecond)
	host2 := func() map[string]uint64 {
		recs, err := d1.cl.HostStatus("LS")
		require.NoError(t, err)
		for _, r := range recs {
			if r.Data32 != 2 {
				continue
			}
			out := map[string]uint64{}
			for _, f := range strings.Fields(r.Text) {
				k, v, _ := strings.Cut(f, "=")
				if n, err := strconv.ParseUint(v, 10, 64); err == nil {
					out[k] = n
				}
			}
			return out
		}
		t.Fatalf("no record of host 2 in %v", recs)
		return nil
	}
	for i := 0; i < 4; i++ {
		time.Sleep(time.Duration(i*500) * time.Millisecond)
		before := host2()
		old, now := d1.reexec()
		require.NotEqual(t, old, now)
		h, err := d1.cl.GetHosts("LS", 2)
		require.NoError(t, err, "reexec %d: the table is there at once", i)
		require.Len(t, h, 1)
		assert.Equal(t, uint32(wire.HostLive), h[0].State(), "reexec %d", i)
		after := host2()
		for _, k := range []string{"owner_id", "owner_generation", "io_timeout"} {
			assert.Equal(t, before[k], after[k], "reexec %d: %s", i, k)
		}
		for _, k := range []string{"last_check", "last_live", "timestamp"} {
			assert.GreaterOrEqual(t, after[k], before[k], "reexec %d: %s", i, k)
		}
		t.Logf("reexec %d: before %v after %v", i, before, after)
	}
	assert.Zero(t, d1.failures())
}

// An upgrade from the previous release (issue 14 item 2, docs/upgrade.md
// "Upgrading from the previous release"): the serving image writes the
// state in format 1 (GOSANLOCK_HANDOVER_WRITE_FORMAT=1) through the real
// exchange (control channel, memfd, SCM_RIGHTS) and our binary, which
// reads 1..2, takes over: the pid changes, a registered client keeps its
// registration on its old connection, and the new image serves new
// clients and joins. A format-1 state with a joined lockspace is refused
// (format 1 has no record to continue renewals from): the reexec fails
// and the old image serves on.
func TestReexecFromFormat1Process(t *testing.T) {
	t.Parallel()
	d := startProcDaemonEnv(t, []string{"GOSANLOCK_HANDOVER_WRITE_FORMAT=1"}, "-w", "0")
	h, err := d.cl.Register()
	require.NoError(t, err)
	defer h.Close()
	registered := func() bool { return d.hasClient(t, os.Getpid()) }
	// REGISTER has no reply: the daemon lists the client once it has read it.
	require.Eventually(t, registered, 10*time.Second, 5*time.Millisecond)
	for i := 0; i < 2; i++ {
		old, now := d.reexec()
		require.NotEqual(t, old, now)
		_, _, err = h.Inquire()
		require.NoError(t, err, "the registered connection is served by the new image")
		require.True(t, registered(), "reexec %d: the registration survives", i)
	}
	b, _ := os.ReadFile(filepath.Join(d.dir, "daemon.out"))
	assert.Equal(t, 2, strings.Count(string(b), " format 1"), "both handovers wrote format 1")
	assert.Zero(t, d.failures())

	// The new image serves: a join works; then a format-1 handover of a
	// joined lockspace fails cleanly.
	path := lockspaceFile(t, 0)
	ls := &wire.Lockspace{Name: "LS", HostID: 1, Disk: wire.Disk{Path: path}}
	require.NoError(t, d.cl.AddLockspace(ls, 0, 1))
	pid := d.pid()
	require.NoError(t, syscall.Kill(pid, syscall.SIGUSR1))
	require.Eventually(t, func() bool { return d.failures() == 1 }, 20*time.Second, 20*time.Millisecond)
	assert.Equal(t, pid, d.pid())
	_, _, err = h.Inquire()
	require.NoError(t, err)
	require.True(t, registered())
	st := d.spaceStatus("LS")
	assert.Equal(t, "1", st["host_generation"], "%v", st)
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
	require.NoError(t, d.cl.AddLockspace(ls, 0, 1))
	f := &leaseFixture{t: t, d: d, orphans: orphans, res: func(i int, flags uint32) wire.Resource {
		return wire.Resource{LockspaceName: "LS", Name: "R" + strconv.Itoa(i), Flags: flags,
			Disks: []wire.Disk{{Path: path, Offset: uint64(i+1) << 20}}}
	}}
	var err error
	f.holder, err = d.cl.Register()
	require.NoError(t, err)
	t.Cleanup(func() { f.holder.Close() })
	require.NoError(t, f.holder.Acquire([]wire.Resource{f.res(0, 0), f.res(1, wire.ResShared)}, 0, nil))
	var n int
	f.state, n, err = f.holder.Inquire()
	require.NoError(t, err)
	require.Equal(t, 2, n)
	gone, err := d.cl.Register()
	require.NoError(t, err)
	var rs []wire.Resource
	for _, o := range orphans {
		rs = append(rs, f.res(o.i, wire.ResPersistent|o.flags))
	}
	require.NoError(t, gone.Acquire(rs, 0, nil))
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
	recs, err := d.cl.Status(0)
	require.NoError(t, err)
	for _, r := range recs {
		if r.Type == wire.StateClient && r.Data32 == uint32(pid) {
			return true
		}
	}
	return false
}
