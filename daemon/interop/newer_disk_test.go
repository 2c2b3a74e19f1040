package interop

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/daemon"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/diskio"
	"github.com/gosanlock/gosanlock/internal/debtree"
	"github.com/gosanlock/gosanlock/internal/testutil"
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// TestNewerFormatCluster: a sanlock 5.1.1 daemon (host 1) and ours (host
// 2) share a lockspace and a resource that 5.1.1 created in its own
// format (delta 5.0, paxos 7.0). Both join, each sees the other LIVE, the
// resource is held by one side at a time in both directions, and every
// record keeps its version.
func TestNewerFormatCluster(t *testing.T) {
	needRealSanlock(t) // the C tool drives our daemon
	sid := debtree.Get(t, "sid")
	path := testutil.LeaseFile(t, 2<<20)
	res := "LS:R:" + path + ":1048576"
	for _, args := range [][]string{
		{"direct", "init", "-s", "LS:0:" + path + ":0", "-o", "1"},
		{"direct", "init", "-r", res},
	} {
		out, err := sid.Command(nil, append([]string{"sanlock"}, args...)...).CombinedOutput()
		require.NoError(t, err, "%v: %s", args, out)
	}
	ls0 := readDelta(t, path, "LS", 1)
	require.Equal(t, diskfmt.DeltaVersion50, ls0.Version)

	d := sid.StartDaemon(t, "", "-e", "sid-host1")
	g, _ := startLS(t, "go-host2", manager.Setup{})
	done := make(chan error, 1)
	go func() {
		out, err := d.Client(t, "client", "add_lockspace", "-s", "LS:1:"+path+":0")
		if err == nil && !strings.Contains(out, "add_lockspace done 0") {
			err = fmt.Errorf("%s", out)
		}
		done <- err
	}()
	require.NoError(t, g.cl.AddLockspace(context.Background(), &wire.Lockspace{Name: "LS", HostID: 2, Disk: wire.Disk{Path: path}}, 0, 1))
	require.NoError(t, <-done, "5.1.1 add_lockspace")
	for h := uint64(1); h <= 2; h++ {
		assert.Equal(t, diskfmt.DeltaVersion50, readDelta(t, path, "LS", h).Version, "host %d record", h)
	}
	require.Eventually(t, func() bool { return goHostState(g.cl, "LS", 1) == "LIVE" }, 30*time.Second, 250*time.Millisecond)
	require.Eventually(t, func() bool {
		out, _ := d.Client(t, "client", "gets", "-h", "1")
		return strings.Contains(out, "h 2 gen 1 timestamp") && strings.Contains(out, "LIVE")
	}, 30*time.Second, 250*time.Millisecond)

	// tryOurs and trySid run `client command -r R -c /bin/true` against
	// one daemon and return the acquire result line.
	acquireLine := func(out string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "acquire done") {
				return l
			}
		}
		return out
	}
	// stdbuf keeps the lines the C tool's stdio buffer loses at exec.
	tryOurs := func() string {
		cmd := exec.Command("stdbuf", "-o0", realSanlock, "client", "command", "-r", res, "-c", "/bin/true")
		cmd.Env = sanlockEnv(g.dir)
		out, _ := cmd.Output()
		return acquireLine(string(out))
	}
	trySid := func() string {
		out, _ := sid.Command(&debtree.Options{RunDir: d.RunDir, Env: []string{"SANLOCK_RUN_DIR=" + debtree.DaemonRunDir}},
			"stdbuf", "-o0", "sanlock", "client", "command", "-r", res, "-c", "/bin/true").Output()
		return acquireLine(string(out))
	}
	leader := func() diskfmt.Leader {
		dev, err := diskio.OpenFile(path)
		require.NoError(t, err)
		defer dev.Close()
		b := make([]byte, 512)
		require.NoError(t, dev.ReadAt(t.Context(), b, 1<<20))
		l, err := diskfmt.DecodeLeader(b)
		require.NoError(t, err)
		return l
	}
	held := func(owner uint64) func() bool {
		return func() bool { l := leader(); return l.OwnerID == owner && l.Timestamp != 0 }
	}

	// 5.1.1 holds R (a sleeping command): ours is refused.
	hold := sid.Command(&debtree.Options{RunDir: d.RunDir, Env: []string{"SANLOCK_RUN_DIR=" + debtree.DaemonRunDir}},
		"sanlock", "client", "command", "-r", res, "-c", "/bin/sleep", "60")
	require.NoError(t, hold.Start())
	holdDone := make(chan struct{})
	go func() { _ = hold.Wait(); close(holdDone) }()
	t.Cleanup(func() { _ = hold.Process.Kill(); <-holdDone })
	require.Eventually(t, held(1), 20*time.Second, 100*time.Millisecond)
	assert.Equal(t, diskfmt.PaxosVersion70, leader().Version)
	assert.Contains(t, []string{"acquire done -243", "acquire done -244"}, tryOurs(), "ours while 5.1.1 holds R")
	require.NoError(t, hold.Process.Kill())
	<-holdDone
	require.Eventually(t, func() bool { return leader().Timestamp == 0 }, 20*time.Second, 100*time.Millisecond)

	// Ours holds R: 5.1.1 is refused.
	ours := exec.Command(realSanlock, "client", "command", "-r", res, "-c", "/bin/sleep", "60")
	ours.Env = sanlockEnv(g.dir)
	require.NoError(t, ours.Start())
	oursDone := make(chan struct{})
	go func() { _ = ours.Wait(); close(oursDone) }()
	t.Cleanup(func() { _ = ours.Process.Kill(); <-oursDone })
	require.Eventually(t, held(2), 20*time.Second, 100*time.Millisecond)
	l := leader()
	assert.Equal(t, diskfmt.PaxosVersion70, l.Version, "our acquire keeps 7.0")
	assert.Contains(t, []string{"acquire done -243", "acquire done -244"}, trySid(), "5.1.1 while ours holds R")
	require.NoError(t, ours.Process.Kill())
	<-oursDone
	require.Eventually(t, func() bool { return leader().Timestamp == 0 }, 20*time.Second, 100*time.Millisecond)
	assert.Equal(t, diskfmt.PaxosVersion70, leader().Version, "our release keeps 7.0")
	free := func() bool { return leader().Timestamp == 0 }
	assert.Equal(t, "acquire done 0", trySid(), "5.1.1 after ours released")
	require.Eventually(t, free, 20*time.Second, 100*time.Millisecond)
	assert.Equal(t, "acquire done 0", tryOurs(), "ours after 5.1.1 released")
	require.Eventually(t, free, 20*time.Second, 100*time.Millisecond)
	last := leader()
	assert.Equal(t, l.Lver+2, last.Lver)
	assert.Equal(t, diskfmt.PaxosVersion70, last.Version)
}

// cutDevice is a delta lease device whose I/O fails once cut is set: our
// host stops renewing while its daemon and its lease stay (a host fenced
// from the storage).
type cutDevice struct {
	diskfmt.Device
	cut *atomic.Bool
}

func (d cutDevice) ReadAt(ctx context.Context, p []byte, off int64) error {
	if d.cut.Load() {
		return syscall.EIO
	}
	return d.Device.ReadAt(ctx, p, off)
}

func (d cutDevice) WriteAt(ctx context.Context, p []byte, off int64) error {
	if d.cut.Load() {
		return syscall.EIO
	}
	return d.Device.WriteAt(ctx, p, off)
}

// TestNewerNoTimeoutDeadExt: a 5.1.1 host (1) and ours (2) in a NO_TIMEOUT
// lockspace (slots written by 5.1.1's `init_host -N 1`), one resource.
//
//  1. 5.1.1 holds R and its daemon is killed: ours cannot take R by time
//     (-249 once host_dead_seconds passed: 18 s with our
//     watchdog_fire_timeout 10), host 1 stays FAIL; set_host DEAD_EXT from
//     ours with a wrong generation is refused (-280, nothing written), with
//     host 1's generation it marks the lease and ours takes R at once.
//  2. A new 5.1.1 daemon rejoins host 1 over the mark (next generation,
//     mark cleared). Ours holds R and is cut from the lockspace storage;
//     5.1.1 marks ours DEAD_EXT with our generation and takes R at once.
func TestNewerNoTimeoutDeadExt(t *testing.T) {
	needRealSanlock(t)
	sid := debtree.Get(t, "sid")
	path := testutil.LeaseFile(t, 2<<20)
	res := "LS:R:" + path + ":1048576"
	for _, args := range [][]string{
		{"direct", "init", "-s", "LS:0:" + path + ":0", "-o", "1"},
		{"direct", "init", "-r", res},
		{"direct", "init_host", "-s", "LS:1:" + path + ":0", "-N", "1", "-C", "0", "-g", "0", "-t", "0", "-o", "1"},
		{"direct", "init_host", "-s", "LS:2:" + path + ":0", "-N", "1", "-C", "0", "-g", "0", "-t", "0", "-o", "1"},
	} {
		out, err := sid.Command(nil, append([]string{"sanlock"}, args...)...).CombinedOutput()
		require.NoError(t, err, "%v: %s", args, out)
	}
	leader := func() diskfmt.Leader {
		dev, err := diskio.OpenFile(path)
		require.NoError(t, err)
		defer dev.Close()
		b := make([]byte, 512)
		require.NoError(t, dev.ReadAt(t.Context(), b, 1<<20))
		l, err := diskfmt.DecodeLeader(b)
		require.NoError(t, err)
		return l
	}
	sidEnv := func(d *debtree.Daemon) *debtree.Options {
		return &debtree.Options{RunDir: d.RunDir, Env: []string{"SANLOCK_RUN_DIR=" + debtree.DaemonRunDir}}
	}
	acquireLine := func(out string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "acquire done") {
				return l
			}
		}
		return out
	}

	d := sid.StartDaemon(t, "", "-e", "sid-host1", "-o", "1")
	cut := &atomic.Bool{}
	g := startDaemon(t, func(c *daemon.Config, deps *daemon.Deps) {
		c.OurHostName = "go-host2"
		c.WatchdogFireTimeout = 10
		deps.Manager = manager.Setup{Open: func(p string) (diskfmt.Device, error) {
			dev, err := diskio.OpenFile(p)
			if err != nil {
				return nil, err
			}
			return cutDevice{dev, cut}, nil
		}}
	})
	g.cl.Timeout = 60 * time.Second
	out, err := d.Client(t, "client", "add_lockspace", "-s", "LS:1:"+path+":0", "-N", "1")
	require.NoError(t, err, out)
	ours := &wire.Lockspace{Name: "LS", HostID: 2, Disk: wire.Disk{Path: path}}
	require.NoError(t, g.cl.AddLockspace(context.Background(), ours, 0, 1))
	for h := uint64(1); h <= 2; h++ {
		slot := readDelta(t, path, "LS", h)
		require.True(t, slot.NoTimeout(), "slot %d", h)
	}
	spaces, err := g.cl.GetLockspaces(context.Background())
	require.NoError(t, err)
	require.Len(t, spaces, 1)
	assert.NotZero(t, spaces[0].Flags&wire.LSFNoTimeout, "ours reports a NO_TIMEOUT lockspace")

	// 1. 5.1.1 holds R and dies.
	hold := sid.Command(sidEnv(d), "sanlock", "client", "command", "-r", res, "-c", "/bin/sleep", "600")
	require.NoError(t, hold.Start())
	holdDone := make(chan struct{})
	go func() { _ = hold.Wait(); close(holdDone) }()
	t.Cleanup(func() { _ = hold.Process.Kill(); <-holdDone })
	require.Eventually(t, func() bool { l := leader(); return l.OwnerID == 1 && l.Timestamp != 0 }, 20*time.Second, 100*time.Millisecond)
	require.NoError(t, syscall.Kill(d.Pid(), syscall.SIGKILL))
	killed := time.Now()
	time.Sleep(10 * time.Second)
	tryOurs := func() string {
		cmd := exec.Command("stdbuf", "-o0", realSanlock, "client", "command", "-r", res, "-c", "/bin/true")
		cmd.Env = sanlockEnv(g.dir)
		out, _ := cmd.Output()
		return acquireLine(string(out))
	}
	assert.Equal(t, "acquire done -249", tryOurs(), "%v after the kill", time.Since(killed).Round(time.Second))
	assert.GreaterOrEqual(t, time.Since(killed), 18*time.Second)
	assert.Equal(t, "FAIL", goHostState(g.cl, "LS", 1), "a silent NO_TIMEOUT host is FAIL, not DEAD")
	assert.Equal(t, uint64(1), leader().OwnerID, "the lease stays with the NO_TIMEOUT host")

	gen1 := readDelta(t, path, "LS", 1).OwnerGeneration
	err = g.cl.SetHost(context.Background(), ours, client.SetHostDeadExt, 0, 0, wire.Host{HostID: 1, Generation: gen1 + 1})
	assert.EqualValues(t, rescode.ErrWrongGeneration, client.ErrorCode(err), "wrong generation")
	// The same through libsanlock 5.1.1's sanlock_set_host (the C
	// driver in the sid tree, our socket mounted at its /run).
	drv := sid.Command(&debtree.Options{RunDir: g.dir, Env: []string{"SANLOCK_RUN_DIR=/run"}}, sid.NewerDriver(t),
		"set_host", "LS", path, "0", "2", "1", "0", "0", "1", fmt.Sprint(gen1+1), "0", "0", "0")
	dout, err := drv.Output()
	require.NoError(t, err)
	assert.Contains(t, string(dout), "set_host rv=-280", "libsanlock's set_host with a wrong generation")
	unmarked := readDelta(t, path, "LS", 1)
	assert.False(t, unmarked.DeadExt(), "nothing written")
	require.NoError(t, g.cl.SetHost(context.Background(), ours, client.SetHostDeadExt, 0, 0, wire.Host{HostID: 1, Generation: gen1}))
	marked := readDelta(t, path, "LS", 1)
	assert.True(t, marked.DeadExt())
	assert.Equal(t, diskfmt.DeadExtFrom(2, readDelta(t, path, "LS", 2).OwnerGeneration), marked.Unused1, "our host_id and generation")
	assert.Equal(t, gen1, marked.OwnerGeneration)
	require.Eventually(t, func() bool {
		h, err := g.cl.GetHosts(context.Background(), "LS", 1)
		return err == nil && len(h) == 1 && h[0].Flags == 0x15
	}, 10*time.Second, 250*time.Millisecond, "DEAD with the DEAD_EXT host flag")
	start := time.Now()
	assert.Equal(t, "acquire done 0", tryOurs(), "ours after DEAD_EXT")
	assert.Less(t, time.Since(start), 10*time.Second)

	// 2. 5.1.1 comes back over the mark; ours holds R and is cut off.
	d2 := sid.StartDaemon(t, "", "-e", "sid-host1", "-o", "1")
	out, err = d2.Client(t, "client", "add_lockspace", "-s", "LS:1:"+path+":0", "-N", "1")
	require.NoError(t, err, out)
	back := readDelta(t, path, "LS", 1)
	assert.Equal(t, gen1+1, back.OwnerGeneration, "5.1.1 rejoins with the next generation")
	assert.False(t, back.DeadExt(), "and clears the mark")
	oursHold := exec.Command(realSanlock, "client", "command", "-r", res, "-c", "/bin/sleep", "600")
	oursHold.Env = sanlockEnv(g.dir)
	require.NoError(t, oursHold.Start())
	oursDone := make(chan struct{})
	go func() { _ = oursHold.Wait(); close(oursDone) }()
	t.Cleanup(func() { _ = oursHold.Process.Kill(); <-oursDone })
	require.Eventually(t, func() bool { l := leader(); return l.OwnerID == 2 && l.Timestamp != 0 }, 20*time.Second, 100*time.Millisecond)
	gen2 := readDelta(t, path, "LS", 2).OwnerGeneration
	cut.Store(true) // fenced: no more renewals from ours
	out, err = d2.Client(t, "client", "set_host", "-s", "LS:1:"+path+":0", "-i", "2", "-g", fmt.Sprint(gen2), "-F", "DEAD_EXT")
	require.NoError(t, err, out)
	assert.Contains(t, out, "set_host done 0")
	oursMarked := readDelta(t, path, "LS", 2)
	assert.True(t, oursMarked.DeadExt())
	start = time.Now()
	o, _ := sid.Command(sidEnv(d2), "stdbuf", "-o0", "sanlock", "client", "command", "-r", res, "-c", "/bin/true").Output()
	assert.Equal(t, "acquire done 0", acquireLine(string(o)), "5.1.1 after DEAD_EXT on ours")
	t.Logf("5.1.1 took R %v after marking ours", time.Since(start).Round(100*time.Millisecond))
}
