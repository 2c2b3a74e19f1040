package daemon

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/internal/testutil"
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

// countingLockspaces is a LockspaceManager fake with a settable count.
type countingLockspaces struct {
	NoLockspaces
	mu       sync.Mutex
	n        int
	shutdown int
}

func (l *countingLockspaces) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

func (l *countingLockspaces) set(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n = n
}
