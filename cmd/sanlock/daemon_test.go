package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// quietLog keeps a daemon a test starts away from the host's
// /var/log/sanlock.log: the C daemon's log file path is fixed, so it gets
// -L -1 (no log file); ours is pointed at the test's run dir through
// SANLOCK_LOG_FILE by the callers.
func quietLog(bin string, args ...string) []string {
	if bin == realSanlock {
		args = append(args, "-L", "-1")
	}
	return args
}

// startDaemonBin starts `bin daemon -D` on runDir and stops it by pid at
// cleanup. It returns the process and its stderr.
func startDaemonBin(t testing.TB, bin, runDir string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(bin, quietLog(bin, "daemon", "-D", "-w", "0", "-l", "0", "-U", "root", "-G", "root")...)
	cmd.Args[0] = "sanlock"
	cmd.Env = append(os.Environ(), "SANLOCK_RUN_DIR="+runDir, "SANLOCK_PRIVILEGED=0",
		"SANLOCK_LOG_FILE="+filepath.Join(runDir, "sanlock.log"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	require.Eventually(t, func() bool {
		c, err := net.Dial("unix", filepath.Join(runDir, "sanlock.sock"))
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "daemon did not start: %s", &stderr)
	return cmd, &stderr
}

// TestSingleInstance: a second daemon on the same run dir exits 1 with
// sanlock's lockfile message, for both binaries, and leaves the first one
// serving. The run dir holds sanlock.pid with the first daemon's pid, and
// ours, started second, names that pid whichever daemon runs.
func TestSingleInstance(t *testing.T) {
	ours := interop(t)
	for name, bin := range map[string]string{"sanlock-3.8.5": realSanlock, "gosanlock": ours} {
		t.Run(name, func(t *testing.T) {
			dir, err := os.MkdirTemp("", "gsi")
			require.NoError(t, err)
			t.Cleanup(func() { os.RemoveAll(dir) })
			first, _ := startDaemonBin(t, bin, dir)

			second := run(t, bin, "", []string{"SANLOCK_RUN_DIR=" + dir, "SANLOCK_PRIVILEGED=0",
				"SANLOCK_LOG_FILE=" + filepath.Join(dir, "sanlock.log")},
				quietLog(bin, "daemon", "-D", "-w", "0", "-l", "0", "-U", "root", "-G", "root")...)
			require.Equal(t, 1, second.exit, "%s", second)
			require.Contains(t, second.stderr,
				"lockfile setlk error "+filepath.Join(dir, "sanlock.pid")+": Resource temporarily unavailable")

			pid, err := os.ReadFile(filepath.Join(dir, "sanlock.pid"))
			require.NoError(t, err)
			require.Equal(t, fmt.Sprintf("%d\n", first.Process.Pid), string(pid))

			// Ours also names the running daemon on stderr, with -D and
			// without it (where it starts nothing in the background and
			// exits 1; 3.8.5's parent exits 0 and its child logs the line).
			// A key of its config file it does not know is said first
			// (with -D as a log line on stderr).
			running := fmt.Sprintf("sanlock daemon: already running (pid %d)\n", first.Process.Pid)
			conf := filepath.Join(dir, "sanlock.conf")
			require.NoError(t, os.WriteFile(conf, []byte("# typo\nuse_watchdgo = 0\n"), 0o644))
			typo := conf + `:2: unknown key "use_watchdgo" (ignored)` + "\n"
			env := []string{"SANLOCK_RUN_DIR=" + dir, "SANLOCK_PRIVILEGED=0", "SANLOCK_CONFIG_FILE=" + conf,
				"SANLOCK_LOG_FILE=" + filepath.Join(dir, "sanlock.log")}
			for _, args := range [][]string{{"-D"}, {}} {
				r := run(t, ours, "", env, append([]string{"daemon"}, append(args, "-w", "0", "-l", "0", "-U", "root", "-G", "root")...)...)
				require.Equal(t, 1, r.exit, "%v: %s", args, r)
				require.True(t, strings.HasSuffix(r.stderr, running), "%v: %s", args, r)
				require.Contains(t, r.stderr, typo, "%v", args)
				if len(args) == 0 {
					require.Equal(t, typo+running, r.stderr)
				}
				require.Empty(t, r.stdout)
			}

			v := run(t, realSanlock, "", []string{"SANLOCK_RUN_DIR=" + dir}, "client", "version")
			require.Contains(t, v.stdout, "daemon version 3.8.5 (0x03080500)")
		})
	}
}
