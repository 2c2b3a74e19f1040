package daemon

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/wire"
)

// testDaemon is an in-process server on a short temp run dir.
type testDaemon struct {
	t      *testing.T
	dir    string
	srv    *Server
	cl     *client.Client
	logs   *observer.ObservedLogs
	deaths chan *ClientInfo
}

// testConfig returns a config for tests: unprivileged, no syslog, log file
// and run dir under dir, no mlock, no watchdog.
func testConfig(dir string) *Config {
	cfg := DefaultConfig()
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

func startDaemon(t *testing.T, mod func(*Config, *Deps)) *testDaemon {
	t.Helper()
	dir := shortTempDir(t)
	cfg := testConfig(dir)
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
	v, proto, err := td.cl.Version()
	require.NoError(td.t, err)
	require.Equal(td.t, wire.DaemonVersion, v)
	require.Equal(td.t, wire.ProtoVersion, proto)
}

// header encodes a raw header.
func header(magic, version uint32, cmd wire.Cmd, flags, length, seq, data, data2 uint32) []byte {
	b := make([]byte, 32)
	le := binary.LittleEndian
	le.PutUint32(b[0:], magic)
	le.PutUint32(b[4:], version)
	le.PutUint32(b[8:], uint32(cmd))
	le.PutUint32(b[12:], flags)
	le.PutUint32(b[16:], length)
	le.PutUint32(b[20:], seq)
	le.PutUint32(b[24:], data)
	le.PutUint32(b[28:], data2)
	return b
}

// readAllTimeout reads until EOF; it fails the test if the daemon neither
// answers nor closes within d.
func readAllTimeout(t *testing.T, c *net.UnixConn, d time.Duration) []byte {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(d)))
	b, err := io.ReadAll(c)
	if errors.Is(err, syscall.ECONNRESET) {
		err = nil // closed with our bytes unread
	}
	require.NoError(t, err, "daemon neither replied nor closed")
	return b
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
