package interop

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/daemon"
	"github.com/gosanlock/gosanlock/daemon/config"
	"github.com/gosanlock/gosanlock/internal/testenv"
	"github.com/gosanlock/gosanlock/internal/testutil"
)

const realSanlock = "/usr/sbin/sanlock"

func needRealSanlock(t *testing.T) {
	t.Helper()
	testenv.NeedBinary(t, realSanlock)
}

func sanlockEnv(runDir string) []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, config.EnvRunDir+"=") && !strings.HasPrefix(e, config.EnvPrivileged+"=") {
			env = append(env, e)
		}
	}
	return append(env, config.EnvRunDir+"="+runDir, config.EnvPrivileged+"=0")
}

// realDaemon starts the C daemon on runDir in the foreground (-D) and stops
// it (by its pid) at cleanup.
func realDaemon(t *testing.T, runDir string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(realSanlock, append([]string{"daemon", "-D", "-w", "0", "-l", "0", "-U", "root", "-G", "root", "-L", "-1"}, args...)...)
	cmd.Env = sanlockEnv(runDir)
	cmd.Stderr = io.Discard
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
			return
		default:
		}
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	sock := filepath.Join(runDir, daemon.SockName)
	require.Eventually(t, func() bool {
		c, err := net.Dial("unix", sock)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "real daemon did not start")
	return cmd
}

// runClient runs the C tool against runDir and returns stdout and the exit
// status.
func runClient(t *testing.T, runDir string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(realSanlock, args...)
	cmd.Env = sanlockEnv(runDir)
	out, err := cmd.Output()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return string(out), code
}

// statusKeys returns the "    key=value" key names of `client status -D`.
func statusKeys(out string) []string {
	var keys []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "    ") {
			k, _, _ := strings.Cut(strings.TrimSpace(l), "=")
			keys = append(keys, k)
		}
	}
	return keys
}

// keysWithin reports whether every key of old appears in keys, in the same
// order (the record texts of 3.8.5 are subsequences of ours, which follow
// 5.1.1's key lists).
func keysWithin(old, keys []string) bool {
	i := 0
	for _, k := range keys {
		if i < len(old) && old[i] == k {
			i++
		}
	}
	return i == len(old)
}

// TestCClientDifferential runs `sanlock client ...` of the real 3.8.5 tool
// against the real daemon and against ours, and compares the output.
func TestCClientDifferential(t *testing.T) {
	needRealSanlock(t)
	realDir := testutil.ShortTempDir(t)
	realDaemon(t, realDir, "-e", "hostX")
	td := startDaemon(t, func(c *daemon.Config, _ *daemon.Deps) { c.OurHostName = "hostX" })

	for _, args := range [][]string{
		{"client", "version"},
		{"client", "status"},
		{"client", "status", "-o", "p"},
		{"client", "gets"},
		{"client", "host_status", "-s", "LS"},
		{"client", "inq_lockspace", "-s", "LS:1:/nonexistent:0"},
		{"client", "rem_lockspace", "-s", "LS:1:/nonexistent:0"},
		{"client", "align", "-s", "LS:1:/nonexistent:0"},
		{"client", "status"}, // after the above connections are gone
	} {
		want, wantCode := runClient(t, realDir, args...)
		got, gotCode := runClient(t, td.dir, args...)
		assert.Equal(t, want, got, "sanlock %s", strings.Join(args, " "))
		assert.Equal(t, wantCode, gotCode, "exit status of sanlock %s", strings.Join(args, " "))
	}

	// status -D: 3.8.5's keys in the same order, among the 5.1.1 keys
	// ours adds (io_timeout, watchdog_fire_timeout, ...), and the status
	// client itself shows cmd_active=0 as 3.8.5's main loop does.
	want, _ := runClient(t, realDir, "client", "status", "-D")
	got, _ := runClient(t, td.dir, "client", "status", "-D")
	assert.True(t, keysWithin(statusKeys(want), statusKeys(got)), "3.8.5 keys %v\nours %v", statusKeys(want), statusKeys(got))
	assert.Contains(t, got, "\n    io_timeout=10\n")
	assert.Contains(t, got, "\n    watchdog_fire_timeout=60\n")
	for _, out := range []string{want, got} {
		i := strings.Index(out, "p -1 status\n")
		require.GreaterOrEqual(t, i, 0, out)
		assert.Contains(t, out[i:], "    cmd_active=0\n    cmd_last=5\n")
	}

	// log_dump exits 1 (the result is the byte count); the dump has no
	// newline after its last line, the tool prints one.
	for _, dir := range []string{realDir, td.dir} {
		out, code := runClient(t, dir, "client", "log_dump")
		assert.Equal(t, 1, code)
		assert.True(t, strings.HasSuffix(out, "\n") && !strings.HasSuffix(out, "\n\n"), "%q", out)
		assert.Contains(t, out, "sanlock daemon started 3.8.5 host hostX")
	}

	// A registered python client shows as "p <pid> <pid>".
	py := `import sanlock, subprocess, os, sys
fd = sanlock.register()
sys.stdout.write("PID %d\n" % os.getpid()); sys.stdout.flush()
subprocess.run(["` + realSanlock + `", "client", "status"])
`
	if exec.Command("/usr/bin/python3", "-c", "import sanlock").Run() == nil {
		norm := regexp.MustCompile(`\b\d{2,}\b`)
		var outs [2]string
		for i, dir := range []string{realDir, td.dir} {
			cmd := exec.Command("/usr/bin/python3", "-c", py)
			cmd.Env = sanlockEnv(dir)
			out, err := cmd.Output()
			require.NoError(t, err)
			pidLine, rest, _ := strings.Cut(string(out), "\n")
			pid := strings.TrimPrefix(pidLine, "PID ")
			assert.Contains(t, rest, fmt.Sprintf("p %s %s\n", pid, pid))
			outs[i] = norm.ReplaceAllString(rest, "N")
		}
		assert.Equal(t, outs[0], outs[1])
		select {
		case ci := <-td.deaths:
			assert.Greater(t, ci.Pid, 0)
		case <-time.After(5 * time.Second):
			t.Error("death hook not run for the python client")
		}
	}

	// shutdown: same output, both daemons exit.
	want, wantCode := runClient(t, realDir, "client", "shutdown")
	got, gotCode := runClient(t, td.dir, "client", "shutdown")
	assert.Equal(t, want, got)
	assert.Equal(t, wantCode, gotCode)
	select {
	case <-td.srv.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("our daemon did not exit on client shutdown")
	}
	// client version against a stopped daemon: connection refused.
	out, code := runClient(t, td.dir, "client", "version")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "daemon version error -111\n")
}

var logLinePrefix = regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \d+ \[\d+\]: `)

// TestLockfileInterop checks that our lock file excludes the real daemon and
// the other way round, with the same message.
func TestLockfileInterop(t *testing.T) {
	needRealSanlock(t)

	// Ours holds the lock: the C daemon exits 1.
	td := startDaemon(t, nil)
	cmd := exec.Command(realSanlock, "daemon", "-D", "-w", "0", "-l", "0", "-U", "root", "-G", "root", "-L", "-1")
	cmd.Env = sanlockEnv(td.dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "the C daemon started although we hold the lock")
	assert.Equal(t, 1, ee.ExitCode())
	want := fmt.Sprintf("lockfile setlk error %s/sanlock.pid: Resource temporarily unavailable", td.dir)
	assert.Contains(t, logLinePrefix.ReplaceAllString(stderr.String(), ""), want+"\n")
	td.mustVersion()

	// The C daemon holds the lock: Start fails with the same line.
	realDir := testutil.ShortTempDir(t)
	realDaemon(t, realDir)
	s := daemon.New(testutil.DaemonConfig(realDir), daemon.Deps{})
	err = s.Start()
	require.Error(t, err)
	assert.True(t, errors.Is(err, daemon.ErrLocked))
	assert.Equal(t, fmt.Sprintf("lockfile setlk error %s/sanlock.pid: Resource temporarily unavailable", realDir), err.Error())
	out, code := runClient(t, realDir, "client", "version")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "daemon version 3.8.5 (0x03080500)")
}
