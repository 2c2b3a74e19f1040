package daemon

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/internal/testutil"
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/testdisk"
	"github.com/gosanlock/gosanlock/wire"
)

// testDaemon is an in-process server on a short temp run dir.
type testDaemon struct {
	t      testing.TB
	dir    string
	srv    *Server
	cl     *client.Client
	logs   *observer.ObservedLogs
	deaths chan *ClientInfo
}

func startDaemon(t testing.TB, mod func(*Config, *Deps)) *testDaemon {
	t.Helper()
	dir := testutil.ShortTempDir(t)
	cfg := testutil.DaemonConfig(dir)
	core, logs := observer.New(zapcore.DebugLevel)
	td := &testDaemon{t: t, dir: dir, logs: logs, deaths: make(chan *ClientInfo, 16)}
	deps := Deps{LogCore: core, Stderr: io.Discard, OnClientDead: func(ci *ClientInfo) {
		select {
		case td.deaths <- ci:
		default:
		}
	}}
	if mod != nil {
		mod(cfg, &deps)
	}
	td.srv = New(cfg, deps)
	require.NoError(t, td.srv.Start())
	t.Cleanup(td.srv.Stop)
	td.cl = testutil.Dial(t, dir, 10*time.Second)
	testutil.NoPanicsAtCleanup(t, logs)
	return td
}

// dial opens a raw connection.
func (td *testDaemon) dial() *net.UnixConn {
	td.t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: td.srv.SockPath(), Net: "unix"})
	require.NoError(td.t, err)
	td.t.Cleanup(func() { c.Close() })
	return c
}

// mustVersion checks that the daemon still answers.
func (td *testDaemon) mustVersion() {
	td.t.Helper()
	testutil.MustVersion(td.t, td.cl)
}

// memLockspace is a lease manager setup whose every disk is one in-memory
// disk holding lockspace "LS" (io_timeout 1), and that lockspace for
// host_id 1.
func memLockspace(t testing.TB) (manager.Setup, *wire.Lockspace) {
	t.Helper()
	disk := testdisk.NewMem(1<<20, 512)
	require.NoError(t, diskfmt.WriteLockspace(context.Background(), disk, 0, 0, "LS", 1, 0))
	open := func(string) (diskfmt.Device, error) { return nopClose{disk}, nil }
	return manager.Setup{Open: open}, &wire.Lockspace{Name: "LS", HostID: 1, Disk: wire.Disk{Path: "mem"}}
}
