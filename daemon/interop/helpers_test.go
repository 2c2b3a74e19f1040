package interop

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/daemon"
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/wire"
)

// The helpers below are copies of daemon's test helpers (helpers_test.go,
// lockspaces_test.go), written against the daemon's exported API.

// testDaemon is an in-process server on a short temp run dir.
type testDaemon struct {
	t      *testing.T
	dir    string
	srv    *daemon.Server
	cl     *client.Client
	logs   *observer.ObservedLogs
	deaths chan *daemon.ClientInfo
}

// testConfig returns a config for tests: unprivileged, no syslog, log file
// and run dir under dir, no mlock, no watchdog.
func testConfig(dir string) *daemon.Config {
	cfg := daemon.DefaultConfig()
	cfg.RunDir = dir
	cfg.Privileged = false
	cfg.LogFile = filepath.Join(dir, "sanlock.log")
	cfg.SyslogPriority = -1
	cfg.MlockLevel = 0
	cfg.UseWatchdog = false
	cfg.SetIDs(os.Getuid(), os.Getgid())
	return cfg
}

// shortTempDir returns a directory under /tmp whose socket path fits the
// 107-byte sun_path limit.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gs")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func startDaemon(t *testing.T, mod func(*daemon.Config, *daemon.Deps)) *testDaemon {
	t.Helper()
	dir := shortTempDir(t)
	cfg := testConfig(dir)
	core, logs := observer.New(zapcore.DebugLevel)
	td := &testDaemon{t: t, dir: dir, logs: logs, deaths: make(chan *daemon.ClientInfo, 16)}
	deps := daemon.Deps{LogCore: core, Stderr: io.Discard, OnClientDead: func(ci *daemon.ClientInfo) {
		select {
		case td.deaths <- ci:
		default:
		}
	}}
	if mod != nil {
		mod(cfg, &deps)
	}
	td.srv = daemon.New(cfg, deps)
	require.NoError(t, td.srv.Start())
	t.Cleanup(td.srv.Stop)
	cl, err := client.Dial(dir)
	require.NoError(t, err)
	cl.Timeout = 10 * time.Second
	td.cl = cl
	t.Cleanup(func() {
		for _, e := range logs.FilterMessage("connection panic").All() {
			t.Errorf("panic logged: %v", e.ContextMap())
		}
	})
	return td
}

// leaseFile returns a zero-filled file of size bytes under /var/tmp (O_DIRECT
// does not work on tmpfs).
func leaseFile(t *testing.T, size int64) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "gsls")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := filepath.Join(dir, "leases")
	require.NoError(t, os.WriteFile(p, nil, 0o644))
	require.NoError(t, os.Truncate(p, size))
	return p
}

// startLS starts an in-process daemon with the real lockspace manager.
func startLS(t *testing.T, host string, lcfg manager.LockspacesConfig) (*testDaemon, *manager.Lockspaces) {
	t.Helper()
	m := manager.New(manager.Config{Lockspaces: lcfg})
	td := startDaemon(t, func(c *daemon.Config, d *daemon.Deps) {
		c.OurHostName = host
		d.Manager = m
	})
	td.cl.Timeout = 30 * time.Second
	return td, m.Lockspaces
}

func code(err error) int { return client.ErrorCode(err) }

// mustVersion checks that the daemon still answers.
func (td *testDaemon) mustVersion() {
	td.t.Helper()
	v, proto, err := td.cl.Version()
	require.NoError(td.t, err)
	require.Equal(td.t, wire.DaemonVersion, v)
	require.Equal(td.t, wire.ProtoVersion, proto)
}
