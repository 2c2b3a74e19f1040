package wdmdcli

import (
	"fmt"
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

	"github.com/gosanlock/gosanlock/wdmd/testdev"
	"github.com/gosanlock/gosanlock/wdmd/wdmdclient"
)

const cSanlock = "/usr/sbin/sanlock"

// lockRunDir serialises the tests that need the fixed /run/wdmd (the C
// sanlock and the C wdmd use it, it cannot be moved).
func lockRunDir(t *testing.T) {
	t.Helper()
	unlock, err := testdev.LockRunDir()
	require.NoError(t, err)
	t.Cleanup(unlock)
}

// recvTrace is one record received by our wdmd (--trace-records).
type recvTrace struct {
	ci                        int
	magic, cmd, len, flags    uint64
	interval, fire, keepalive uint64
	renewal, expire           uint64
	name                      string
}

var traceRe = regexp.MustCompile(`recv ci=(\d+) magic=(\d+) cmd=(\d+) len=(\d+) flags=(\d+) test_interval=(\d+) fire_timeout=(\d+) last_keepalive=(\d+) renewal=(\d+) expire=(\d+) name=(.*)$`)

func traces(lines []string) []recvTrace {
	var out []recvTrace
	for _, l := range lines {
		m := traceRe.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		n := func(i int) uint64 { v, _ := strconv.ParseUint(m[i], 10, 64); return v }
		out = append(out, recvTrace{int(n(1)), n(2), n(3), n(4), n(5), n(6), n(7), n(8), n(9), n(10), m[11]})
	}
	return out
}

// childPids lists the children of pid (all its threads).
func childPids(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, w := range strings.Fields(string(b)) {
			if v, err := strconv.Atoi(w); err == nil {
				out = append(out, v)
			}
		}
	}
	return out
}

// TestCSanlockWithOurWdmd: the C sanlock daemon (-w 1) with our wdmd and
// the emulated device: add_lockspace registers with wdmd exactly like our
// Go client does, renewals keep the device pinged, rem_lockspace removes
// its expiry (test_live 0 0, refcount clear, close), and SIGKILL of the
// C daemon with a joined lockspace leaves a dead slot whose expiry makes
// wdmd close the device at expire-10 and the device fire.
func TestCSanlockWithOurWdmd(t *testing.T) {
	t.Parallel()
	lockRunDir(t)
	const fireAfter = 3 * time.Second
	d := startDaemon(t, "/run/wdmd", testdev.Options{FireAfter: fireAfter}, "--test-interval", "2", "--trace-records")
	t.Cleanup(func() { _ = os.Remove("/run/wdmd/wdmd.pid") }) // left by the SIGKILL below
	d.waitReady(t)

	leaseDir, err := os.MkdirTemp("/var/tmp", "wdmdcli")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(leaseDir) })
	env := []string{"SANLOCK_PRIVILEGED=0", "SANLOCK_RUN_DIR=" + t.TempDir()}
	sanlock := func(args ...string) string {
		cmd := exec.Command(cSanlock, args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "sanlock %v: %s", args, out)
		return string(out)
	}
	for _, ls := range []string{"A", "B"} {
		f := filepath.Join(leaseDir, ls)
		require.NoError(t, os.WriteFile(f, make([]byte, 1<<20), 0o644))
		// io_timeout 1 on disk makes the first acquire short (docs/timing.md "Mixed io_timeouts")
		sanlock("direct", "init", "-s", ls+":0:"+f+":0", "-o", "1")
	}
	sd := start(t, env, cSanlock, "daemon", "-D", "-w", "1", "-l", "0", "-U", "root", "-G", "root", "-L", "-1")
	var helpers []int
	t.Cleanup(func() {
		for _, pid := range helpers {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	waitFor(t, 10*time.Second, "sanlock daemon socket", func() bool {
		helpers = childPids(sd.cmd.Process.Pid)
		_, err := os.Stat(filepath.Join(strings.TrimPrefix(env[1], "SANLOCK_RUN_DIR="), "sanlock.sock"))
		return err == nil && len(helpers) > 0
	})

	// Join both lockspaces at once (io_timeout 2: expiry = L+16).
	errs := make(chan error, 2)
	for _, ls := range []string{"A", "B"} {
		go func() {
			cmd := exec.Command(cSanlock, "client", "add_lockspace", "-s", ls+":1:"+filepath.Join(leaseDir, ls)+":0", "-o", "2")
			cmd.Env = append(os.Environ(), env...)
			out, err := cmd.CombinedOutput()
			if err == nil && !strings.Contains(string(out), "done 0") {
				err = fmt.Errorf("add_lockspace %s: %s", ls, out)
			}
			errs <- err
		}()
	}
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)

	// Renewals keep the device pinged: watch for 7 s.
	pingsBefore := countKind(d.bank.Events(), testdev.Keepalive)
	renewals := map[string]bool{}
	renewalRe := regexp.MustCompile(`name sanlock_A:1 pid \d+ fd \d+ dead 0 ref 1 now \d+ renewal (\d+) expire (\d+)`)
	for end := time.Now().Add(7 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		dump, err := wdmdclient.Dump(d.socket())
		require.NoError(t, err)
		if m := renewalRe.FindStringSubmatch(dump); m != nil {
			renewals[m[1]] = true
			r, _ := strconv.ParseUint(m[1], 10, 64)
			e, _ := strconv.ParseUint(m[2], 10, 64)
			require.Equal(t, r+16, e)
		}
	}
	require.GreaterOrEqual(t, len(renewals), 2, "renewals seen in the dump")
	require.GreaterOrEqual(t, countKind(d.bank.Events(), testdev.Keepalive)-pingsBefore, 3, "pings every 2 s during 7 s")
	require.Zero(t, countKind(d.bank.Events(), testdev.CloseUnclean))

	// rem_lockspace B: its expiry is removed and the slot freed.
	require.Contains(t, sanlock("client", "rem_lockspace", "-s", "B:1:"+filepath.Join(leaseDir, "B")+":0"), "done 0")
	waitFor(t, 10*time.Second, "B slot freed", func() bool {
		dump, err := wdmdclient.Dump(d.socket())
		return err == nil && !strings.Contains(dump, "sanlock_B:1")
	})

	// What the C sanlock sent, per connection, compared with what our Go
	// client sends for the same lockspace life.
	bTrace := session(d.p.lines(), "sanlock_B:1")
	require.NotEmpty(t, bTrace)
	cmds := []uint64{}
	for _, tr := range bTrace {
		cmds = append(cmds, tr.cmd)
		require.Zero(t, tr.magic)
		require.Zero(t, tr.len)
		require.Zero(t, tr.flags)
		require.Zero(t, tr.interval)
		require.Zero(t, tr.fire)
		require.Zero(t, tr.keepalive)
		if tr.cmd == 1 {
			require.Equal(t, "sanlock_B:1", tr.name)
		} else {
			require.Empty(t, tr.name)
		}
		if tr.cmd == 4 && tr.expire != 0 {
			require.Equal(t, tr.renewal+16, tr.expire)
		}
	}
	require.Regexp(t, `^1 2 5 (4 )+4 3$`, strings.Trim(fmt.Sprint(cmds), "[]"))
	last4 := bTrace[len(bTrace)-2]
	require.Zero(t, last4.renewal)
	require.Zero(t, last4.expire)

	goTrace := goClientTrace(t, d)
	require.Len(t, goTrace, 7)
	for i, tr := range goTrace {
		c := bTrace[i]
		if i >= 4 {
			c = bTrace[len(bTrace)-(len(goTrace)-i)]
		}
		c.ci, tr.ci = 0, 0
		c.renewal, c.expire, tr.renewal, tr.expire = 0, 0, 0, 0
		c.name, tr.name = "", ""
		require.Equal(t, c, tr, "record %d", i)
	}

	// SIGKILL of the C daemon with A joined: the slot stays dead with its
	// expiry, wdmd warns at expire-10, closes the device, and it fires.
	dump, err := wdmdclient.Dump(d.socket())
	require.NoError(t, err)
	m := renewalRe.FindStringSubmatch(dump)
	require.NotNil(t, m)
	sd.signal(syscall.SIGKILL)
	sd.wait(t, 10*time.Second)
	killedAt := time.Now()
	fire, err := d.bank.WaitFired(t.Context())
	require.NoError(t, err)
	t.Logf("fired %.1f s after the SIGKILL", time.Since(killedAt).Seconds())

	out := d.p.out.String()
	dead := regexp.MustCompile(`client dead ci \d+ fd \d+ pid \d+ renewal (\d+) expire (\d+) sanlock_A:1`).FindStringSubmatch(out)
	require.NotNil(t, dead, "client dead line")
	renewal, _ := strconv.ParseUint(dead[1], 10, 64)
	expire, _ := strconv.ParseUint(dead[2], 10, 64)
	require.Equal(t, renewal+16, expire)
	require.Contains(t, out, fmt.Sprintf("test warning now %d ping", expire-10))
	var closeAt time.Duration
	for _, e := range d.bank.Events() {
		if e.Kind == testdev.CloseUnclean {
			closeAt = e.At
		}
	}
	require.Equal(t, expire-10, uint64(closeAt/time.Second), "unclean close at expire-10")
	require.InDelta(t, fireAfter.Seconds(), (fire.At - closeAt).Seconds(), 0.3)
	require.Less(t, uint64(fire.At/time.Second), renewal+hostDeadIO2)

	// The dead slot keeps its refcount: SIGTERM is ignored.
	d.p.signal(syscall.SIGTERM)
	time.Sleep(300 * time.Millisecond)
	require.True(t, d.p.running())
	d.p.signal(syscall.SIGKILL)
	d.p.wait(t, 10*time.Second)
}

// host_dead_seconds for io_timeout 2 with the real 60-s fire timeout.
const hostDeadIO2 = 8*2 + 60

// goClientTrace runs the Go client's lockspace session against d and
// returns the records d received from it.
func goClientTrace(t *testing.T, d *testDaemon) []recvTrace {
	t.Helper()
	s, err := wdmdclient.Open(d.socket(), "GO", 1)
	require.NoError(t, err)
	now := monoNow()
	require.NoError(t, s.Activate(now, now+16))
	require.NoError(t, s.Renewed(now+4, now+20))
	require.NoError(t, s.Deactivate())
	require.NoError(t, s.Close())
	var got []recvTrace
	waitFor(t, 5*time.Second, "go client records", func() bool {
		got = session(d.p.lines(), "sanlock_GO:1")
		return len(got) == 7
	})
	return got
}

// session returns the records of the connection that registered name,
// from the REGISTER to the REFCOUNT_CLEAR (slot numbers are reused once a
// connection is gone).
func session(lines []string, name string) []recvTrace {
	var out []recvTrace
	ci := -1
	for _, tr := range traces(lines) {
		switch {
		case ci < 0 && tr.cmd == 1 && tr.name == name:
			ci = tr.ci
			out = append(out, tr)
		case ci >= 0 && tr.ci == ci:
			out = append(out, tr)
			if tr.cmd == 3 {
				return out
			}
		}
	}
	return out
}
