// Package testutil holds the test helpers shared by the packages that test
// the daemon: temp dirs and lease files, the SIGTERM-ignoring TestMain,
// the systemd notify stand-in, python3-sanlock lookup, lease files laid
// out for a resource cluster, and the checks every in-process daemon test
// makes. It imports no package of the daemon itself (daemon's own tests
// use it), and nothing outside tests imports it.
package testutil

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest/observer"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/daemon/config"
	"github.com/gosanlock/gosanlock/internal/testenv"
	"github.com/gosanlock/gosanlock/wire"
)

// MainIgnoringSIGTERM runs m with SIGTERM ignored, and exits. Tests that
// register this process as a lease holder with an in-process daemon need
// it: the daemon's recovery sends its holders SIGTERM when a lockspace
// fails or is removed with leases still held, and on a loaded machine
// (io_timeout 1, race detector, other test binaries running) a renewal can
// fail after the test that watched for the signal has stopped watching;
// the default action would kill every test of the package. Tests that wait
// for the signal (client.Reg.WatchRevocations) still get it: Go delivers
// it to every channel registered for it. name says whose tests in the
// notice.
func MainIgnoringSIGTERM(m *testing.M, name string) {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM)
	go func() {
		for range sigs {
			fmt.Fprintf(os.Stderr, "%s tests: SIGTERM received (a daemon's recovery signalled this test process); ignored\n", name)
		}
	}()
	os.Exit(m.Run())
}

// ShortTempDir returns a directory under /tmp whose socket path fits the
// 107-byte sun_path limit, removed at cleanup.
func ShortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gs")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// LeaseFile returns a zero-filled file of size bytes under /var/tmp
// (O_DIRECT does not work on tmpfs), removed at cleanup.
func LeaseFile(t testing.TB, size int64) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "gsls")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := filepath.Join(dir, "leases")
	require.NoError(t, os.WriteFile(p, nil, 0o644))
	require.NoError(t, os.Truncate(p, size))
	return p
}

// Code is the sanlock result code of err (0 for nil).
func Code(err error) int { return client.ErrorCode(err) }

// MustVersion checks that the daemon behind cl still answers, with our
// daemon and protocol versions.
func MustVersion(t testing.TB, cl *client.Client) {
	t.Helper()
	v, proto, err := cl.Version(context.Background())
	require.NoError(t, err)
	require.Equal(t, wire.DaemonVersion, v)
	require.Equal(t, wire.ProtoVersion, proto)
}

// Dial returns a client of the daemon in runDir with a call timeout.
func Dial(t testing.TB, runDir string, timeout time.Duration) *client.Client {
	t.Helper()
	cl, err := client.Dial(runDir)
	require.NoError(t, err)
	cl.Timeout = timeout
	return cl
}

// NoPanicsAtCleanup fails the test, at cleanup, for every "connection
// panic" an in-process daemon logged into logs.
func NoPanicsAtCleanup(t testing.TB, logs *observer.ObservedLogs) {
	t.Cleanup(func() {
		for _, e := range logs.FilterMessage("connection panic").All() {
			t.Errorf("panic logged: %v", e.ContextMap())
		}
	})
}

// PythonSanlock returns a python3 that can import the python3-sanlock
// module, or skips the test.
func PythonSanlock(t testing.TB) string {
	t.Helper()
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(py, "-c", "import sanlock").Run() == nil {
			return py
		}
	}
	testenv.Missing(t, "python3-sanlock not installed")
	return ""
}

// Notify is a datagram socket standing in for systemd's NOTIFY_SOCKET.
type Notify struct {
	Path string
	c    *net.UnixConn
}

// FakeSystemd listens on a datagram socket in dir, closed at cleanup.
func FakeSystemd(t testing.TB, dir string) *Notify {
	t.Helper()
	return ListenNotify(t, filepath.Join(dir, "notify"))
}

// ListenNotify listens on a datagram socket at path ("@name": abstract),
// closed at cleanup.
func ListenNotify(t testing.TB, path string) *Notify {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return &Notify{Path: path, c: c}
}

// Next returns the next message; the 30-s deadline only bounds a broken
// test.
func (n *Notify) Next(t testing.TB) string {
	t.Helper()
	require.NoError(t, n.c.SetReadDeadline(time.Now().Add(30*time.Second)))
	b := make([]byte, 256)
	k, err := n.c.Read(b)
	require.NoError(t, err)
	return string(b[:k])
}

// RawHeader encodes a message header field by field, without the codec,
// for tests that send the daemon malformed messages.
func RawHeader(magic, version uint32, cmd wire.Cmd, flags, length, seq, data, data2 uint32) []byte {
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

// ReadAllTimeout reads c until EOF; it fails the test if the daemon neither
// answers nor closes within d.
func ReadAllTimeout(t testing.TB, c net.Conn, d time.Duration) []byte {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(d)))
	b, err := io.ReadAll(c)
	if errors.Is(err, syscall.ECONNRESET) {
		err = nil // closed with our bytes unread
	}
	require.NoError(t, err, "daemon neither replied nor closed")
	return b
}

// DaemonConfig returns a daemon config for tests: unprivileged, no syslog,
// log file and run dir under dir, no mlock, no watchdog.
func DaemonConfig(dir string) *config.Config {
	cfg := config.DefaultConfig()
	cfg.RunDir = dir
	cfg.Privileged = false
	cfg.LogFile = filepath.Join(dir, "sanlock.log")
	cfg.SyslogPriority = -1
	cfg.MlockLevel = 0
	cfg.UseWatchdog = false
	cfg.GenerationDir = "" // not the host's /var/lib/sanlock
	cfg.SetIDs(os.Getuid(), os.Getgid())
	return cfg
}
