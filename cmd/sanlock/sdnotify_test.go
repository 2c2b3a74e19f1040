package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/internal/testutil"
)

// TestSystemdNotify: under a Type=notify unit (NOTIFY_SOCKET set, no -D)
// our daemon does not fork, sends READY=1 once its socket listens,
// WATCHDOG=1 pings for WatchdogSec=, and STOPPING=1 when it exits. A
// datagram socket stands in for systemd (docs/systemd.md).
func TestSystemdNotify(t *testing.T) {
	ours := interop(t)
	dir := t.TempDir()
	sd := testutil.FakeSystemd(t, dir)
	notify := sd.Path
	next := func() string { return sd.Next(t) }

	runDir := filepath.Join(dir, "run")
	cmd := exec.Command(ours, "daemon", "-w", "0", "-l", "0", "-U", "root", "-G", "root", "-L", "-1", "-S", "-1")
	cmd.Args[0] = "sanlock"
	cmd.Env = append(os.Environ(), "SANLOCK_RUN_DIR="+runDir, "SANLOCK_PRIVILEGED=0",
		"NOTIFY_SOCKET="+notify, "WATCHDOG_USEC=40000")
	require.NoError(t, cmd.Start())
	var waitErr error
	done := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			<-done
		}
	})

	require.Equal(t, "READY=1", next())
	pid, err := os.ReadFile(filepath.Join(runDir, "sanlock.pid"))
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("%d\n", cmd.Process.Pid), string(pid), "the daemon must not fork under systemd")
	cl, err := net.Dial("unix", filepath.Join(runDir, "sanlock.sock"))
	require.NoError(t, err, "READY=1 before the socket listens")
	cl.Close()
	require.Equal(t, "WATCHDOG=1", next())

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	for {
		s := next()
		if s != "WATCHDOG=1" {
			require.Equal(t, "STOPPING=1", s)
			break
		}
	}
	select {
	case <-done:
		require.NoError(t, waitErr)
	case <-time.After(30 * time.Second):
		t.Fatal("daemon did not exit after SIGTERM")
	}
}
