package wdmdcli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/wdmd/testdev"
)

// wdmdBin is our wdmd, built once for the package's tests with goBin.
var wdmdBin, goBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wdmdcli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	wdmdBin = filepath.Join(dir, "wdmd")
	goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(goBin, "build", "-tags", "wdmd_testdev", "-o", wdmdBin, "github.com/gosanlock/gosanlock/cmd/wdmd").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build wdmd: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// syncBuffer collects a process's output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a process started by a test; it is killed (by pid) at the end
// of the test if it still runs.
type proc struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	code int
}

func start(t *testing.T, env []string, name string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(name, args...), out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.Env = append(os.Environ(), env...)
	require.NoError(t, p.cmd.Start())
	go func() {
		_ = p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("output of %s %v:\n%s", name, args, p.out.String())
		}
	})
	return p
}

func (p *proc) signal(sig syscall.Signal) { _ = p.cmd.Process.Signal(sig) }

// wait waits for the exit and returns the exit code (-1 if killed by a
// signal).
func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(timeout):
		t.Fatalf("process %v still running after %v", p.cmd.Args, timeout)
	}
	return 0
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// dPrefix is the start of a -D line: epoch, date, time and two spaces.
var dPrefix = regexp.MustCompile(`^\d+ \d{4}-\d\d-\d\d \d\d:\d\d:\d\d  `)

// lines returns the output lines without the "<epoch> <date> <time>  "
// prefix of -D.
func (p *proc) lines() []string {
	var out []string
	for _, l := range strings.Split(p.out.String(), "\n") {
		if l == "" {
			continue
		}
		out = append(out, dPrefix.ReplaceAllString(l, ""))
	}
	return out
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// daemonEnv is one of our wdmd daemons with its own run dir, crash marker
// and served test device bank.
type testDaemon struct {
	runDir string
	marker string
	sock   string
	bank   *testdev.Bank
	p      *proc
}

func (d *testDaemon) socket() string { return filepath.Join(d.runDir, "wdmd.sock") }

// startDaemon runs "wdmd -D" with a private run dir (unless runDir is
// given), a private crash marker and an emulated device.
func startDaemon(t *testing.T, runDir string, opts testdev.Options, args ...string) *testDaemon {
	t.Helper()
	dir := t.TempDir()
	if runDir == "" {
		runDir = filepath.Join(dir, "run")
	}
	d := &testDaemon{runDir: runDir, marker: filepath.Join(dir, "shm-wdmd"), sock: filepath.Join(dir, "dev.sock")}
	d.bank = testdev.NewBank(opts)
	srv, err := d.bank.Serve(d.sock)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = srv.Close()
		d.bank.Stop()
	})
	all := append([]string{"-D", "--run-dir", d.runDir, "--shm-marker", d.marker, "--test-device", d.sock}, args...)
	d.p = start(t, nil, wdmdBin, all...)
	return d
}

// waitReady waits until the daemon found the device (probed it: open,
// get, magic close) and listens. The device is armed only when a client
// needs it.
func (d *testDaemon) waitReady(t *testing.T) {
	t.Helper()
	waitFor(t, 10*time.Second, "wdmd ready", func() bool {
		if !d.p.running() {
			t.Fatalf("wdmd exited %d:\n%s", d.p.code, d.p.out.String())
		}
		_, err := os.Stat(d.socket())
		return strings.Contains(d.p.out.String(), "wdmd started") && len(d.bank.Events()) >= 4 && err == nil
	})
}

func countKind(evs []testdev.Event, k testdev.Kind) int {
	n := 0
	for _, e := range evs {
		if e.Kind == k {
			n++
		}
	}
	return n
}

func clockGettime(ts *syscall.Timespec) error {
	var u unix.Timespec
	err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &u)
	ts.Sec, ts.Nsec = u.Sec, u.Nsec
	return err
}

// lookupGroup is the gid the daemon gives its socket for group name.
func lookupGroup(name string) (int, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(g.Gid)
}
