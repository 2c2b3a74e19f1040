package interop

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/daemon"
	"github.com/gosanlock/gosanlock/internal/testutil"
	"github.com/gosanlock/gosanlock/manager"
)

// testDaemon, startDaemon and startLS mirror daemon's own test helpers
// (helpers_test.go, lockspaces_test.go) over the daemon's exported API;
// what they share is in internal/testutil.

// testDaemon is an in-process server on a short temp run dir.
type testDaemon struct {
	t      *testing.T
	dir    string
	srv    *daemon.Server
	cl     *client.Client
	logs   *observer.ObservedLogs
	deaths chan *daemon.ClientInfo
}

func startDaemon(t *testing.T, mod func(*daemon.Config, *daemon.Deps)) *testDaemon {
	t.Helper()
	dir := testutil.ShortTempDir(t)
	cfg := testutil.DaemonConfig(dir)
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
	td.cl = testutil.Dial(t, dir, 10*time.Second)
	testutil.NoPanicsAtCleanup(t, logs)
	return td
}

// startLS starts an in-process daemon with the real lockspace manager.
func startLS(t *testing.T, host string, st manager.Setup) (*testDaemon, *manager.Lockspaces) {
	t.Helper()
	td := startDaemon(t, func(c *daemon.Config, d *daemon.Deps) {
		c.OurHostName = host
		d.Manager = st
	})
	td.cl.Timeout = 30 * time.Second
	return td, td.srv.Manager().Lockspaces
}

// mustVersion checks that the daemon still answers.
func (td *testDaemon) mustVersion() {
	td.t.Helper()
	testutil.MustVersion(td.t, td.cl)
}
