package wdmdcli

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/internal/testutil"
	"github.com/gosanlock/gosanlock/wdmd/testdev"
)

// TestSystemdNotify: under a Type=notify unit (NOTIFY_SOCKET set, no -D)
// wdmd does not fork, sends READY=1 once the device is armed and the
// socket listens, WATCHDOG=1 pings for WatchdogSec=, and STOPPING=1 on
// SIGTERM. A datagram socket stands in for systemd.
func TestSystemdNotify(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sd := testutil.FakeSystemd(t, dir)
	notify := sd.Path
	next := func() string { return sd.Next(t) }

	bank := testdev.NewBank(testdev.Options{InitialTimeout: 30})
	devSock := filepath.Join(dir, "dev.sock")
	srv, err := bank.Serve(devSock)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close(); bank.Stop() })
	runDir := filepath.Join(dir, "run")
	p := start(t, []string{"NOTIFY_SOCKET=" + notify, "WATCHDOG_USEC=40000"}, wdmdBin,
		"--run-dir", runDir, "--shm-marker", filepath.Join(dir, "shm-wdmd"), "--test-device", devSock)

	require.Equal(t, "READY=1", next())
	require.True(t, p.running(), "wdmd must not fork under systemd")
	pid, err := os.ReadFile(filepath.Join(runDir, "wdmd.pid"))
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(p.cmd.Process.Pid)+"\n", string(pid))
	require.Equal(t, "WATCHDOG=1", next())

	p.signal(syscall.SIGTERM)
	for {
		s := next()
		if s != "WATCHDOG=1" {
			require.Equal(t, "STOPPING=1", s)
			break
		}
	}
	require.Equal(t, 0, p.wait(t, 30*time.Second))
}
