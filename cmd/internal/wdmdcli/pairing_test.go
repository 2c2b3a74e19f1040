package wdmdcli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/internal/debtree"
	"github.com/gosanlock/gosanlock/internal/testenv"
	"github.com/gosanlock/gosanlock/wdmd"
	"github.com/gosanlock/gosanlock/wdmd/testdev"
)

// The pairings of a sanlock daemon and a wdmd across versions
// (docs/wdmd.md "Pairings"): ours, the host's 3.8.5 and the 3.9.5 and
// 5.1.1 of the Debian root trees (internal/debtree). In each one the
// lockspace is joined with the watchdog, and the test proves with an
// emulated device that the device is armed (with the sanlock's fire
// timeout), pinged while the lockspace renews, and fires once the
// renewals stop (the sanlock daemon is killed).
//
// A C wdmd opens the device path given with -w; an LD_PRELOAD library
// (wdmd/testdev/testdata/wdshim.c, compiled in the tree) turns that path
// into the served testdev.Bank, so its timer runs in the test. The tree
// daemons run with debtree.Tree.Command (a private mount namespace,
// chrooted, the host's /var/tmp at the same path): the test directory is
// under /var/tmp and its run/ is the tree's /run, so /run/wdmd (wdmd's
// fixed socket directory) and /run/sanlock are the test's. The host's
// 3.8.5 binaries run in a private mount namespace with the same /run and
// their own /dev/shm.

// hostNS runs "$@" in a private mount namespace where $1 is /run and
// /dev/shm is a new tmpfs (the host's 3.8.5 binaries).
const hostNS = `mount --bind "$1" /run && mount -t tmpfs tmpfs /dev/shm || exit 99
shift
exec "$@"
`

// side is one daemon of a pairing: ours, or the C one of a version.
type side string

const (
	ours   side = "ours"
	host   side = "3.8.5" // /usr/sbin on the host
	trixie side = "3.9.5" // Debian trixie tree
	sid    side = "5.1.1" // Debian sid tree
)

func (s side) treeName() string {
	switch s {
	case trixie:
		return "trixie"
	case sid:
		return "sid"
	}
	return ""
}

var (
	sanlockOnce sync.Once
	sanlockBin  string
	sanlockErr  error
)

// ourSanlock builds our sanlock once for the package's tests.
func ourSanlock(t *testing.T) string {
	t.Helper()
	sanlockOnce.Do(func() {
		sanlockBin = filepath.Join(filepath.Dir(wdmdBin), "sanlock")
		out, err := exec.Command(goBin, "build", "-o", sanlockBin, "github.com/gosanlock/gosanlock/cmd/sanlock").CombinedOutput()
		if err != nil {
			sanlockErr = fmt.Errorf("build sanlock: %v\n%s", err, out)
		}
	})
	require.NoError(t, sanlockErr)
	return sanlockBin
}

// pairing is the shared state of one pairing test.
type pairing struct {
	t     *testing.T
	dir   string // under /var/tmp: the same path in the trees (O_DIRECT lease file)
	trees map[side]*debtree.Tree
	bank  *testdev.Bank
	devP  string // the device path the wdmd opens
	wdmd  *proc
	sl    *proc
	slS   side
	wdS   side
	fire  int // the sanlock's watchdog_fire_timeout
}

func (p *pairing) need(s side) {
	t := p.t
	t.Helper()
	testenv.NeedRoot(t, "mount namespaces, chroot")
	switch s {
	case host:
		testenv.NeedBinary(t, cSanlock)
	case trixie, sid:
		p.trees[s] = debtree.Get(t, s.treeName())
	}
}

func newPairing(t *testing.T, sl, wd side) *pairing {
	t.Helper()
	p := &pairing{t: t, slS: sl, wdS: wd, fire: 60, trees: map[side]*debtree.Tree{}}
	p.need(sl)
	p.need(wd)
	dir, err := os.MkdirTemp("/var/tmp", "wdmdpair")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	for _, d := range []string{"run/wdmd", "run/sanlock"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	p.dir = dir
	return p
}

// serveDevice serves the emulated device. It fires 2 s after the test
// interval that goes with the device timeout has passed without a ping
// (wdmd tests every 10 s at 60 s), so a test sees the fire in seconds.
func (p *pairing) serveDevice() {
	t := p.t
	after := time.Duration(wdmd.IntervalFor(p.fire))*time.Second + 2*time.Second
	p.bank = testdev.NewBank(testdev.Options{FireAfter: after})
	srv, err := p.bank.Serve(filepath.Join(p.dir, "bank.sock"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close(); p.bank.Stop() })
}

func (p *pairing) path(rel string) string { return filepath.Join(p.dir, rel) }

// nsCommand is argv run by C side s: in its tree or, for the host's
// binaries, in a private namespace; in both the test's run/ is /run. A
// tree's sanlock also gets the test's sanlock.conf.
func (p *pairing) nsCommand(s side, env []string, argv ...string) *exec.Cmd {
	if tr := p.trees[s]; tr != nil {
		var binds []debtree.Bind
		if _, err := os.Stat(p.path("sanlock.conf")); err == nil {
			binds = append(binds, debtree.Bind{Host: p.path("sanlock.conf"), Tree: "/etc/sanlock/sanlock.conf"})
		}
		return tr.Command(&debtree.Options{RunDir: p.path("run"), Env: env, Binds: binds}, argv...)
	}
	args := append([]string{"-m", "--propagation", "private", "sh", "-c", hostNS, "sh", p.path("run"), "env"}, env...)
	return exec.Command("unshare", append(args, argv...)...)
}

// startWdmd starts the pairing's wdmd and waits until it listens.
func (p *pairing) startWdmd() {
	t := p.t
	sock := p.path("run/wdmd/wdmd.sock")
	p.serveDevice()
	if p.wdS == ours {
		p.devP = "/dev/watchdog0"
		p.wdmd = start(t, nil, wdmdBin, "-D", "-G", "root", "--run-dir", p.path("run/wdmd"),
			"--shm-marker", p.path("shm-wdmd"), "--test-device", p.path("bank.sock"))
	} else {
		shim := p.buildShim(p.wdS)
		p.devP = p.path("wd")
		require.NoError(t, os.WriteFile(p.devP, nil, 0o644))
		cmd := p.nsCommand(p.wdS, []string{"LD_PRELOAD=" + shim, "WDSHIM_PATH=" + p.devP, "WDSHIM_SOCK=" + p.path("bank.sock")},
			"wdmd", "-D", "-G", "root", "-w", p.devP)
		p.wdmd = startCmd(t, cmd)
	}
	waitFor(t, 10*time.Second, "wdmd socket", func() bool {
		if !p.wdmd.running() {
			t.Fatalf("wdmd exited %d:\n%s", p.wdmd.code, p.wdmd.out.String())
		}
		_, err := os.Stat(sock)
		// wdmd listens before it looks for the device: wait for the probe
		// (3.9+: open, get, magic close) or the arming (3.8.5).
		return err == nil && (len(p.bank.Events()) >= 4 || p.wdS == host && p.armed())
	})
}

// buildShim compiles the LD_PRELOAD device library with side s's
// compiler (the tree's gcc, or the host's) into the test directory.
func (p *pairing) buildShim(s side) string {
	t := p.t
	src, err := os.ReadFile(filepath.Join("..", "..", "..", "wdmd", "testdev", "testdata", "wdshim.c"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p.path("wdshim.c"), src, 0o644))
	gcc := []string{"gcc", "-shared", "-fPIC", "-o", p.path("wdshim.so"), p.path("wdshim.c"), "-ldl"}
	var cmd *exec.Cmd
	if tr := p.trees[s]; tr != nil {
		cmd = tr.Command(nil, gcc...)
	} else {
		cmd = exec.Command(gcc[0], gcc[1:]...)
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "compile the shim: %s", out)
	return p.path("wdshim.so")
}

// sanlockCmd is a sanlock command of the pairing's sanlock side. Every
// side's SANLOCK_RUN_DIR is the test's run/sanlock.
func (p *pairing) sanlockCmd(args ...string) *exec.Cmd {
	if p.slS == ours {
		cmd := exec.Command(ourSanlock(p.t), args...)
		cmd.Env = append(os.Environ(), "SANLOCK_PRIVILEGED=0", "SANLOCK_RUN_DIR="+p.path("run/sanlock"),
			"SANLOCK_WDMD_SOCKET="+p.path("run/wdmd/wdmd.sock"), "SANLOCK_CONFIG_FILE="+p.path("sanlock.conf"))
		return cmd
	}
	bin := "sanlock"
	if p.slS == host {
		bin = cSanlock
	}
	return p.nsCommand(p.slS, []string{"SANLOCK_PRIVILEGED=0", "SANLOCK_RUN_DIR=/run/sanlock"}, append([]string{bin}, args...)...)
}

func (p *pairing) sanlock(args ...string) string {
	out, err := p.sanlockCmd(args...).CombinedOutput()
	require.NoError(p.t, err, "sanlock %v: %s", args, out)
	return string(out)
}

// ioTimeout is the lockspace's io_timeout: 1 s at a fire timeout below
// 30 s (warning margin 2 s: expiry L+8, warnings from L+6, renewals every
// 2 s), else 2 s (margin 5 or 10 s: expiry L+16, renewals every 4 s).
func (p *pairing) ioTimeout() int {
	if p.fire < 30 {
		return 1
	}
	return 2
}

// startSanlock starts the sanlock daemon with the watchdog and makes the
// lockspace LS (io_timeout 1 on disk, so the first acquire is short). Ours
// and the trees' read watchdog_fire_timeout from the test's sanlock.conf;
// 3.8.5 has no such setting (60).
func (p *pairing) startSanlock() {
	t := p.t
	require.NoError(t, os.WriteFile(p.path("sanlock.conf"), fmt.Appendf(nil, "watchdog_fire_timeout = %d\n", p.fire), 0o644))
	require.NoError(t, os.WriteFile(p.path("ls"), make([]byte, 1<<20), 0o644))
	p.sanlock("direct", "init", "-s", "LS:0:"+p.path("ls")+":0", "-o", "1")
	p.sl = startCmd(t, p.sanlockCmd("daemon", "-D", "-w", "1", "-l", "0", "-U", "root", "-G", "root"))
	waitFor(t, 10*time.Second, "sanlock socket", func() bool {
		if !p.sl.running() {
			t.Fatalf("sanlock exited %d:\n%s", p.sl.code, p.sl.out.String())
		}
		_, err := os.Stat(p.path("run/sanlock/sanlock.sock"))
		return err == nil
	})
}

func (p *pairing) addLockspace() string {
	cmd := p.sanlockCmd("client", "add_lockspace", "-s", "LS:1:"+p.path("ls")+":0", "-o", strconv.Itoa(p.ioTimeout()))
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// startCmd starts cmd like start does.
func startCmd(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	require.NoError(t, cmd.Start())
	go func() {
		_ = cmd.Wait()
		p.code = cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		// The C sanlock's helper is a child of the daemon: kill it by pid.
		for _, c := range childPids(cmd.Process.Pid) {
			_ = syscall.Kill(c, syscall.SIGKILL)
		}
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("output of %v:\n%s", cmd.Args, p.out.String())
		}
	})
	return p
}

func (p *pairing) armed() bool { return p.bank.Armed(p.devP) }

// logEvents logs the device events (at the end of a failed test).
func (p *pairing) logEvents() {
	p.t.Cleanup(func() {
		if p.t.Failed() && p.bank != nil {
			for _, e := range p.bank.Events() {
				p.t.Log("device:", e)
			}
		}
	})
}

// run is the pairing test: the device is not armed before the join
// (unless the wdmd is 3.8.5, which arms it at its start), is armed with
// the sanlock's fire timeout after it, is pinged while the lockspace
// renews, and fires once the sanlock daemon is killed, before
// host_dead_seconds (8·io + fire) after the last renewal.
func (p *pairing) run() {
	t := p.t
	p.logEvents()
	p.startWdmd()
	if p.wdS == host {
		require.True(t, p.armed(), "wdmd 3.8.5 arms the device at its start")
	} else {
		require.False(t, p.armed(), "the device is only probed at wdmd's start")
		require.Equal(t, []testdev.Kind{testdev.Open, testdev.GetTimeout, testdev.Write, testdev.CloseClean}, kindsOf(p.bank.Events()))
	}
	p.startSanlock()
	joinStart := time.Now()
	out := p.addLockspace()
	require.Contains(t, out, "done 0", "add_lockspace: %s", out)
	t.Logf("add_lockspace done 0 after %.1f s", time.Since(joinStart).Seconds())
	require.True(t, p.armed(), "armed after the join")
	evs := p.bank.Events()
	timeout := 60
	for _, e := range evs {
		if e.Kind == testdev.SetTimeout {
			timeout = e.Value
		}
	}
	require.Equal(t, p.fire, timeout, "the device timeout is the sanlock's fire timeout")

	// Pinged while renewing (a C wdmd tests only every test interval).
	before := countPings(p.bank.Events())
	time.Sleep(time.Duration(wdmd.IntervalFor(p.fire))*time.Second + 2*time.Second)
	require.Greater(t, countPings(p.bank.Events()), before, "pinged while renewing")
	require.Zero(t, countKind(p.bank.Events(), testdev.CloseUnclean))
	require.Zero(t, countKind(p.bank.Events(), testdev.Fire))

	// Renewals stop: the sanlock daemon is killed. Its wdmd slot keeps the
	// last expiry, wdmd stops pinging, the device fires.
	for _, c := range childPids(p.sl.cmd.Process.Pid) {
		_ = syscall.Kill(c, syscall.SIGKILL)
	}
	p.sl.signal(syscall.SIGKILL)
	p.sl.wait(t, 10*time.Second)
	killed := time.Now()
	fire, err := p.bank.WaitFired(t.Context())
	require.NoError(t, err)
	t.Logf("fired %.1f s after the kill", time.Since(killed).Seconds())
	last := lastRenewal(t, p)
	hostDead := last + 8*uint64(p.ioTimeout()) + uint64(p.fire)
	require.Less(t, uint64(fire.At/time.Second), hostDead, "fire before host_dead_seconds (last renewal %d)", last)
}

// lastRenewal is the last renewal wdmd was told of, from its log.
func lastRenewal(t *testing.T, p *pairing) uint64 {
	t.Helper()
	var last uint64
	for _, m := range regexp.MustCompile(`test_live ci \d+ renewal (\d+) expire (\d+)`).FindAllStringSubmatch(p.wdmd.out.String(), -1) {
		if v, _ := strconv.ParseUint(m[1], 10, 64); v > last {
			last = v
		}
	}
	require.NotZero(t, last, "test_live lines in wdmd's log")
	return last
}

func kindsOf(evs []testdev.Event) []testdev.Kind {
	var out []testdev.Kind
	for _, e := range evs {
		out = append(out, e.Kind)
	}
	return out
}

func countPings(evs []testdev.Event) int {
	n := 0
	for _, e := range evs {
		if e.Kind == testdev.Keepalive || e.Kind == testdev.Write && e.Value == 0 {
			n++
		}
	}
	return n
}

// openLine is the line a wdmd 3.9+ (and ours) logs for OPEN_WATCHDOG.
func openLine(fire, result int) string {
	return fmt.Sprintf("open_watchdog fire_timeout %d result %d", fire, result)
}

// openLogged says whether a wdmd logged openLine(fire, result) itself
// (not the line of a client without OPEN_WATCHDOG, which contains it).
func openLogged(out string, fire, result int) bool {
	return regexp.MustCompile(`(?m)\d\d:\d\d:\d\d  ` + openLine(fire, result) + `$`).MatchString(out)
}

func TestPairOursOurs(t *testing.T) {
	t.Parallel()
	p := newPairing(t, ours, ours)
	p.fire = 10
	p.run()
	require.True(t, openLogged(p.wdmd.out.String(), 10, 10))
}

func TestPairOursTrixieWdmd(t *testing.T) {
	t.Parallel()
	p := newPairing(t, ours, trixie)
	p.fire = 10
	p.run()
	require.True(t, openLogged(p.wdmd.out.String(), 10, 10))
}

func TestPairOursSidWdmd(t *testing.T) {
	t.Parallel()
	p := newPairing(t, ours, sid)
	p.fire = 30
	p.run()
	require.True(t, openLogged(p.wdmd.out.String(), 30, 30))
}

// TestPairOursHostWdmd: wdmd 3.8.5 does not answer OPEN_WATCHDOG; our
// sanlock goes on after its bounded wait, since that wdmd armed the device
// with 60 s at its start, and STATUS confirms 60.
func TestPairOursHostWdmd(t *testing.T) {
	t.Parallel()
	p := newPairing(t, ours, host)
	p.run()
	require.NotContains(t, p.wdmd.out.String(), "open_watchdog")
	require.Contains(t, p.sl.out.String(), "wdmd did not answer open_watchdog")
}

// TestPairOursHostWdmdOtherTimeout: with watchdog_fire_timeout 30, a wdmd
// 3.8.5 (armed with 60 s) cannot protect the lockspace: add_lockspace
// fails -203.
func TestPairOursHostWdmdOtherTimeout(t *testing.T) {
	t.Parallel()
	p := newPairing(t, ours, host)
	p.fire = 30
	p.startWdmd()
	p.startSanlock()
	require.Contains(t, p.addLockspace(), "done -203")
}

// TestPairTrixieSanlockOurWdmd: sanlock 3.9.5 reads watchdog_fire_timeout
// 10 from its sanlock.conf and asks our wdmd for it.
func TestPairTrixieSanlockOurWdmd(t *testing.T) {
	t.Parallel()
	p := newPairing(t, trixie, ours)
	p.fire = 10
	p.run()
	require.True(t, openLogged(p.wdmd.out.String(), 10, 10))
}

func TestPairSidSanlockOurWdmd(t *testing.T) {
	t.Parallel()
	p := newPairing(t, sid, ours)
	p.fire = 30
	p.run()
	require.True(t, openLogged(p.wdmd.out.String(), 30, 30))
}

// TestPairHostSanlockOurWdmd: sanlock 3.8.5 never sends OPEN_WATCHDOG; our
// wdmd arms the device at its REGISTER.
func TestPairHostSanlockOurWdmd(t *testing.T) {
	t.Parallel()
	p := newPairing(t, host, ours)
	p.run()
	out := p.wdmd.out.String()
	require.False(t, openLogged(out, 60, 60))
	require.Regexp(t, `open_watchdog for ci \d+ pid \d+ without open_watchdog fire_timeout 60 result 60`, out)
}

// TestTryTimeoutMatchesTrixie runs --trytimeout/-t and --forcefire/-F
// of our wdmd and of wdmd 3.9.5 against two emulated devices and compares
// stdout (without the date, and the descriptor number, which our test
// device does not have), stderr, the exit status and the device events.
func TestTryTimeoutMatchesTrixie(t *testing.T) {
	t.Parallel()
	c := newPairing(t, ours, trixie)
	o := newPairing(t, ours, ours)
	for _, p := range []*pairing{c, o} {
		p.bank = testdev.NewBank(testdev.Options{})
		srv, err := p.bank.Serve(filepath.Join(p.dir, "bank.sock"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = srv.Close(); p.bank.Stop() })
	}
	shim := c.buildShim(trixie)
	c.devP = c.path("wd")
	require.NoError(t, os.WriteFile(c.devP, nil, 0o644))
	norm := regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d  |fd -?\d+`)
	run := func(p *pairing, args ...string) result {
		var cmd *exec.Cmd
		if p == c {
			cmd = p.nsCommand(trixie, []string{"LD_PRELOAD=" + shim, "WDSHIM_PATH=" + c.devP, "WDSHIM_SOCK=" + c.path("bank.sock")},
				append([]string{"wdmd", "-w", c.devP}, args...)...)
		} else {
			cmd = exec.Command(wdmdBin, append([]string{"--test-device", p.path("bank.sock"), "-w", c.devP}, args...)...)
		}
		var out, errb syncBuffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if _, ok := err.(*exec.ExitError); err != nil && !ok {
			t.Fatal(err)
		}
		return result{norm.ReplaceAllString(out.String(), "fd N"), errb.String(), cmd.ProcessState.ExitCode()}
	}
	for _, args := range [][]string{{"-t", "30"}, {"-t", "30"}, {"--trytimeout", "2", "--forcefire"}, {"-F"}, {"-t", "0"}} {
		want := run(c, args...)
		got := run(o, args...)
		require.Equal(t, want, got, "args %q", args)
	}
	require.Equal(t, kindsOf(c.bank.Events()), kindsOf(o.bank.Events()))
}
