package interop

import (
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/internal/debtree"
	"github.com/gosanlock/gosanlock/internal/testutil"
	"github.com/gosanlock/gosanlock/manager"
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
	g, _ := startLS(t, "go-host2", manager.LockspacesConfig{})
	done := make(chan error, 1)
	go func() {
		out, err := d.Client(t, "client", "add_lockspace", "-s", "LS:1:"+path+":0")
		if err == nil && !strings.Contains(out, "add_lockspace done 0") {
			err = fmt.Errorf("%s", out)
		}
		done <- err
	}()
	require.NoError(t, g.cl.AddLockspace(&wire.Lockspace{Name: "LS", HostID: 2, Disk: wire.Disk{Path: path}}, 0, 1))
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
		dev, err := diskfmt.OpenFile(path)
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

// TestNewerNoTimeoutOwner: a 5.1.1 host of a NO_TIMEOUT lockspace (its
// slot written by `init_host -N 1`) holds a resource and its daemon is
// killed. 5.x hosts of such lockspaces run without the watchdog, so ours
// must never take the lease over by time: -243 long after
// host_dead_seconds.
func TestNewerNoTimeoutOwner(t *testing.T) {
	needRealSanlock(t)
	sid := debtree.Get(t, "sid")
	path := testutil.LeaseFile(t, 2<<20)
	res := "LS:R:" + path + ":1048576"
	for _, args := range [][]string{
		{"direct", "init", "-s", "LS:0:" + path + ":0", "-o", "1"},
		{"direct", "init", "-r", res},
		{"direct", "init_host", "-s", "LS:1:" + path + ":0", "-N", "1", "-C", "0", "-g", "0", "-t", "0", "-o", "1"},
	} {
		out, err := sid.Command(nil, append([]string{"sanlock"}, args...)...).CombinedOutput()
		require.NoError(t, err, "%v: %s", args, out)
	}
	d := sid.StartDaemon(t, "", "-e", "sid-host1")
	out, err := d.Client(t, "client", "add_lockspace", "-s", "LS:1:"+path+":0")
	require.NoError(t, err, out)
	own := readDelta(t, path, "LS", 1)
	require.True(t, own.NoTimeout(), "5.1.1 joined with its NO_TIMEOUT slot")
	g, _ := startLS(t, "go-host2", manager.LockspacesConfig{})
	require.NoError(t, g.cl.AddLockspace(&wire.Lockspace{Name: "LS", HostID: 2, Disk: wire.Disk{Path: path}}, 0, 1))

	hold := sid.Command(&debtree.Options{RunDir: d.RunDir, Env: []string{"SANLOCK_RUN_DIR=" + debtree.DaemonRunDir}},
		"sanlock", "client", "command", "-r", res, "-c", "/bin/sleep", "600")
	require.NoError(t, hold.Start())
	holdDone := make(chan struct{})
	go func() { _ = hold.Wait(); close(holdDone) }()
	t.Cleanup(func() { _ = hold.Process.Kill(); <-holdDone })
	leader := func() diskfmt.Leader {
		dev, err := diskfmt.OpenFile(path)
		require.NoError(t, err)
		defer dev.Close()
		b := make([]byte, 512)
		require.NoError(t, dev.ReadAt(t.Context(), b, 1<<20))
		l, err := diskfmt.DecodeLeader(b)
		require.NoError(t, err)
		return l
	}
	require.Eventually(t, func() bool { l := leader(); return l.OwnerID == 1 && l.Timestamp != 0 }, 20*time.Second, 100*time.Millisecond)

	// The owner's daemon dies: no release, no more renewals.
	require.NoError(t, syscall.Kill(d.Pid(), syscall.SIGKILL))
	killed := time.Now()
	time.Sleep(80 * time.Second) // host_dead_seconds at io_timeout 1: 8 + 60
	cmd := exec.Command("stdbuf", "-o0", realSanlock, "client", "command", "-r", res, "-c", "/bin/true")
	cmd.Env = sanlockEnv(g.dir)
	o, _ := cmd.Output()
	assert.Contains(t, string(o), "acquire done -243", "%v after the kill", time.Since(killed).Round(time.Second))
	l := leader()
	assert.Equal(t, uint64(1), l.OwnerID, "the lease stays with the NO_TIMEOUT host")
	assert.NotZero(t, l.Timestamp)
}
