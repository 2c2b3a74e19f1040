package interop

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/diskio"
	"github.com/gosanlock/gosanlock/internal/testutil"
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// crashDev fails every I/O once crashed: the host stops writing its lease
// at once, as when its daemon is killed.
type crashDev struct {
	diskfmt.Device
	dead *atomic.Bool
}

func (d crashDev) ReadAt(ctx context.Context, p []byte, off int64) error {
	if d.dead.Load() {
		return rescode.ErrEIO
	}
	return d.Device.ReadAt(ctx, p, off)
}

func (d crashDev) WriteAt(ctx context.Context, p []byte, off int64) error {
	if d.dead.Load() {
		return rescode.ErrEIO
	}
	return d.Device.WriteAt(ctx, p, off)
}

// crashable returns an Open for manager.Setup whose devices all die
// when the returned flag is set.
func crashable() (func(string) (diskfmt.Device, error), *atomic.Bool) {
	dead := new(atomic.Bool)
	return func(p string) (diskfmt.Device, error) {
		d, err := diskio.OpenFile(p)
		if err != nil {
			return nil, err
		}
		return crashDev{Device: d, dead: dead}, nil
	}, dead
}

// cClient runs `sanlock ARGS` against runDir; safe on any goroutine.
func cClient(runDir string, args ...string) (string, int, error) {
	cmd := exec.Command(realSanlock, args...)
	cmd.Env = sanlockEnv(runDir)
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode(), nil
	}
	return string(out), 0, err
}

var hostLine = regexp.MustCompile(`(?m)^h (\d+) gen (\d+) timestamp (\d+) (\w+)$`)

// cHostState returns the state of host id in `sanlock client gets -h 1`.
func cHostState(runDir string, id int) (string, error) {
	out, _, err := cClient(runDir, "client", "gets", "-h", "1")
	if err != nil {
		return "", err
	}
	for _, m := range hostLine.FindAllStringSubmatch(out, -1) {
		if m[1] == fmt.Sprint(id) {
			return m[4], nil
		}
	}
	return "", nil
}

// goHostState returns the state of host id as our daemon reports it.
func goHostState(cl *client.Client, ls string, id uint64) string {
	h, err := cl.GetHosts(context.Background(), ls, id)
	if err != nil || len(h) != 1 {
		return ""
	}
	return h[0].StateName()
}

// deadWatch polls state() every second until it returns DEAD or timeout,
// and returns the time of the first FAIL and of DEAD after start.
func deadWatch(start time.Time, timeout time.Duration, state func() string) (fail, dead time.Duration, err error) {
	for time.Since(start) < timeout {
		switch state() {
		case "FAIL":
			if fail == 0 {
				fail = time.Since(start)
			}
		case "DEAD":
			return fail, time.Since(start), nil
		}
		time.Sleep(time.Second)
	}
	return fail, 0, fmt.Errorf("not DEAD after %v", timeout)
}

// TestMixedLockspace runs sanlock 3.8.5 daemons and ours on one lockspace
// (io_timeout 1): C host 1, Go host 2, C host 3, Go host 4. Each side sees
// the other alive; a host_id held by a live host of the other kind cannot
// be taken (-262 on both sides); a killed C host is DEAD for us, and a
// crashed Go host is DEAD for sanlock, both no earlier than
// host_dead_seconds = 8*1 + 60.
func TestMixedLockspace(t *testing.T) {
	t.Parallel()
	needRealSanlock(t)
	path := testutil.LeaseFile(t, 1<<20)
	const hostDead = 68 * time.Second

	c1, c3, c6 := testutil.ShortTempDir(t), testutil.ShortTempDir(t), testutil.ShortTempDir(t)
	realDaemon(t, c1, "-e", "c-host1")
	c3cmd := realDaemon(t, c3, "-e", "c-host3")
	realDaemon(t, c6, "-e", "c-host6")
	g2, g2ls := startLS(t, "go-host2", manager.Setup{})
	open4, crash4 := crashable()
	g4, _ := startLS(t, "go-host4", manager.Setup{Open: open4})
	g5, _ := startLS(t, "go-host5", manager.Setup{})
	g5.cl.Timeout = 3 * time.Minute

	out, rc, err := cClient(c1, "client", "init", "-s", "LS:0:"+path+":0", "-o", "1")
	require.NoError(t, err)
	require.Equal(t, 0, rc, out)

	// Join all four at once and time each add.
	lsOf := func(id uint64) *wire.Lockspace {
		return &wire.Lockspace{Name: "LS", HostID: id, Disk: wire.Disk{Path: path}}
	}
	var wg sync.WaitGroup
	durs := make([]time.Duration, 5)
	errs := make([]error, 5)
	for _, id := range []int{1, 3} {
		dir := map[int]string{1: c1, 3: c3}[id]
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			out, rc, err := cClient(dir, "client", "add_lockspace", "-s", fmt.Sprintf("LS:%d:%s:0", id, path), "-o", "1")
			durs[id] = time.Since(start)
			if err == nil && rc != 0 {
				err = fmt.Errorf("C add host %d: %s", id, out)
			}
			errs[id] = err
		}()
	}
	for _, id := range []int{2, 4} {
		cl := map[int]*client.Client{2: g2.cl, 4: g4.cl}[id]
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			errs[id] = cl.AddLockspace(context.Background(), lsOf(uint64(id)), 0, 1)
			durs[id] = time.Since(start)
		}()
	}
	wg.Wait()
	for id := 1; id <= 4; id++ {
		require.NoError(t, errs[id], "add host %d", id)
	}
	t.Logf("add_lockspace io_timeout 1, same run: sanlock %v / %v, ours %v / %v",
		durs[1].Round(time.Millisecond), durs[3].Round(time.Millisecond),
		durs[2].Round(time.Millisecond), durs[4].Round(time.Millisecond))

	// Each side reports the other alive.
	require.Eventually(t, func() bool { return goHostState(g2.cl, "LS", 1) == "LIVE" }, 20*time.Second, 250*time.Millisecond)
	require.Eventually(t, func() bool { return goHostState(g2.cl, "LS", 3) == "LIVE" }, 20*time.Second, 250*time.Millisecond)
	require.Eventually(t, func() bool { s, _ := cHostState(c1, 2); return s == "LIVE" }, 20*time.Second, 250*time.Millisecond)
	require.Eventually(t, func() bool { s, _ := cHostState(c1, 4); return s == "LIVE" }, 20*time.Second, 250*time.Millisecond)
	hs, _, err := cClient(c1, "client", "host_status", "-s", "LS", "-D")
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^2 timestamp \d+\n(    .*\n){7}    owner_name=go-host2$`, hs)
	recs, err := g2.cl.HostStatus(context.Background(), "LS")
	require.NoError(t, err)
	var names []string
	for _, r := range recs {
		names = append(names, r.Text[strings.Index(r.Text, "owner_name="):])
	}
	assert.Equal(t, []string{"owner_name=c-host1", "owner_name=go-host2", "owner_name=c-host3", "owner_name=go-host4"}, names)

	// The C tool reads our daemon like its own.
	gets, _, err := cClient(g2.dir, "client", "gets", "-h", "1")
	require.NoError(t, err)
	assert.Regexp(t, `^s LS:2:`+regexp.QuoteMeta(path)+`:0 \n(h \d gen 1 timestamp \d+ (LIVE|UNKNOWN)\n){4}$`, gets)
	wantD, _, err := cClient(c1, "client", "status", "-D")
	require.NoError(t, err)
	gotD, _, err := cClient(g2.dir, "client", "status", "-D")
	require.NoError(t, err)
	lsKeys := func(s string) []string {
		_, after, _ := strings.Cut(s, "\ns LS:")
		return statusKeys(after)
	}
	assert.True(t, keysWithin(lsKeys(wantD), lsKeys(gotD)), "lockspace keys of status -D: 3.8.5 %v, ours %v", lsKeys(wantD), lsKeys(gotD))
	assert.Regexp(t, `(?m)^s LS:2:`+regexp.QuoteMeta(path)+`:0$`, gotD)
	ren, rc, err := cClient(g2.dir, "client", "renewal", "-s", "LS")
	require.NoError(t, err)
	assert.Equal(t, 0, rc)
	assert.Regexp(t, `^(timestamp=\d+ read_ms=\d+ write_ms=\d+ next_timeouts=0 next_errors=0\n)+$`, ren)
	hsGo, _, err := cClient(g2.dir, "client", "host_status", "-s", "LS", "-D")
	require.NoError(t, err)
	// 3.8.5's fields, with 5.1.1's before owner_name (docs/delta.md
	// "NO_TIMEOUT and DEAD_EXT").
	assert.Regexp(t, `(?m)^1 timestamp \d+\n    last_check=\d+\n    last_live=\d+\n    last_req=0\n    owner_id=1\n`+
		`    owner_generation=1\n    timestamp=\d+\n    io_timeout=1\n    no_timeout=0\n    dead_ext=0\n`+
		`    found_dead_ext_gen=0\n    wrote_dead_ext_gen=0\n    host_flags=0x3\n    host_state=LIVE\n    owner_name=c-host1$`, hsGo)

	// Phase 2, all at once.
	type result struct {
		name string
		err  error
	}
	results := make(chan result, 4)
	start := time.Now()

	// Ours cannot take host_id 1 from the live C host.
	go func() {
		t0 := time.Now()
		err := g5.cl.AddLockspace(context.Background(), lsOf(1), 0, 1)
		d := time.Since(t0)
		if testutil.Code(err) != client.SanlkHostIDBusy {
			err = fmt.Errorf("ours add of host 1: %v, want -262", err)
		} else {
			err = nil
			t.Logf("ours: add of host_id 1 held by C failed -262 after %v", d.Round(time.Millisecond))
		}
		results <- result{"go add busy", err}
	}()
	// sanlock cannot take host_id 2 from our live host.
	go func() {
		t0 := time.Now()
		out, _, err := cClient(c6, "client", "add_lockspace", "-s", "LS:2:"+path+":0", "-o", "1")
		d := time.Since(t0)
		if err == nil && !strings.Contains(out, "add_lockspace_timeout done -262") {
			err = fmt.Errorf("C add of host 2: %q", out)
		}
		if err == nil {
			t.Logf("sanlock: add of host_id 2 held by ours failed -262 after %v", d.Round(time.Millisecond))
		}
		results <- result{"C add busy", err}
	}()
	// SIGKILL the C host 3: ours must see it DEAD, not before host_dead_seconds.
	require.NoError(t, c3cmd.Process.Signal(syscall.SIGKILL))
	killed := time.Now()
	go func() {
		fail, dead, err := deadWatch(killed, 100*time.Second, func() string { return goHostState(g2.cl, "LS", 3) })
		if err == nil {
			t.Logf("ours sees killed C host 3: FAIL after %v, DEAD after %v", fail.Round(time.Second), dead.Round(time.Second))
			if dead < hostDead-3*time.Second || fail == 0 || fail < 8*time.Second-3*time.Second {
				err = fmt.Errorf("C host 3 FAIL at %v DEAD at %v: too early", fail, dead)
			}
		}
		results <- result{"go sees C dead", err}
	}()
	// Crash our host 4 (its lease is not released): sanlock must see it DEAD.
	crash4.Store(true)
	g4.srv.Stop()
	crashed := time.Now()
	go func() {
		fail, dead, err := deadWatch(crashed, 100*time.Second, func() string { s, _ := cHostState(c1, 4); return s })
		if err == nil {
			t.Logf("sanlock sees crashed Go host 4: FAIL after %v, DEAD after %v", fail.Round(time.Second), dead.Round(time.Second))
			if dead < hostDead-3*time.Second || fail == 0 {
				err = fmt.Errorf("Go host 4 FAIL at %v DEAD at %v: too early", fail, dead)
			}
		}
		results <- result{"C sees go dead", err}
	}()
	for range 4 {
		r := <-results
		assert.NoError(t, r.err, r.name)
	}
	t.Logf("phase 2 took %v", time.Since(start).Round(time.Second))

	// Our own view of the timing rule: DEAD only after more than 8N+W
	// since the last change we saw.
	run, ok := g2ls.Joined("LS")
	require.True(t, ok)
	h3, _ := run.Host(3)
	now := clock.Monotime(clock.NewSystem())
	assert.Greater(t, now-h3.LastLive, uint64(68))
	l4 := readDelta(t, path, "LS", 4)
	assert.NotZero(t, l4.Timestamp, "the crashed host did not release")
}
