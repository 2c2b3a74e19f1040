package server

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPidFileLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	path := filepath.Join(dir, "wdmd.pid")
	f, err := lockPidFile(dir, path)
	require.NoError(t, err)
	defer f.Close()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(os.Getpid())+"\n", string(b))
	// fcntl locks are per process: a second lock from this process
	// succeeds, so only check the error text of a missing directory.
	_, err = lockPidFile("/proc/nonexistent", "/proc/nonexistent/wdmd.pid")
	require.ErrorContains(t, err, "lockfile open error /proc/nonexistent/wdmd.pid: ")
}

func TestPeerPid(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "wdmd.sock")
	l, err := listen(sock, os.Getgid())
	require.NoError(t, err)
	defer l.Close()
	fi, err := os.Stat(sock)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o660), fi.Mode().Perm())
	c, err := net.Dial("unix", sock)
	require.NoError(t, err)
	defer c.Close()
	a, err := l.AcceptUnix()
	require.NoError(t, err)
	sc := &sockConn{c: a, fd: fdOf(a)}
	defer sc.Close()
	pid, err := sc.PeerPid()
	require.NoError(t, err)
	require.Equal(t, os.Getpid(), pid)
	require.Positive(t, sc.Fd())
}
