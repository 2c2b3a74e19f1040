package interop

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/daemon"
	"github.com/gosanlock/gosanlock/internal/testutil"
)

const envHelperRunDir = "GOSANLOCK_TEST_DAEMONIZE_DIR"

// TestDaemonizeHelper is the "main" of the re-executed test binary.
func TestDaemonizeHelper(t *testing.T) {
	dir := os.Getenv(envHelperRunDir)
	if dir == "" {
		t.Skip("helper process only")
	}
	cfg := testutil.DaemonConfig(dir)
	parent, err := daemon.Daemonize(cfg)
	if err != nil {
		os.Exit(3)
	}
	if parent {
		os.Exit(0)
	}
	if err := daemon.Run(context.Background(), cfg, daemon.Deps{}); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// TestDaemonize: without -D the foreground process exits 0 at once and a
// background child in its own session serves the socket.
func TestDaemonize(t *testing.T) {
	if os.Getenv(envHelperRunDir) != "" {
		t.Skip("nested")
	}
	dir := testutil.ShortTempDir(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestDaemonizeHelper$")
	cmd.Env = append(os.Environ(), envHelperRunDir+"="+dir)
	require.NoError(t, cmd.Run(), "the foreground process must exit 0")

	cl, err := client.Dial(dir)
	require.NoError(t, err)
	cl.Timeout = 5 * time.Second
	require.Eventually(t, func() bool { _, _, err := cl.Version(context.Background()); return err == nil }, 10*time.Second, 10*time.Millisecond)
	b, err := os.ReadFile(dir + "/" + daemon.PidFileName)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	assert.NotEqual(t, cmd.Process.Pid, pid, "the daemon is the background child")
	sid, err := unix.Getsid(pid)
	require.NoError(t, err)
	assert.Equal(t, pid, sid, "the child runs in its own session")

	require.NoError(t, cl.Shutdown(context.Background(), false))
	require.Eventually(t, func() bool { _, _, err := cl.Version(context.Background()); return err != nil }, 10*time.Second, 10*time.Millisecond)
}
