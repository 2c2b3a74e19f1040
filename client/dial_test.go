package client

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// fullBacklog listens on dir/sanlock.sock with a backlog of 0 and fills it
// with raw dials until a dial fails with EAGAIN. It returns the listening
// fd.
func fullBacklog(t *testing.T, dir string) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	path := filepath.Join(dir, SockName)
	require.NoError(t, unix.Bind(fd, &unix.SockaddrUnix{Name: path}))
	require.NoError(t, unix.Listen(fd, 0))
	for i := 0; ; i++ {
		require.Less(t, i, 64, "the listen backlog never filled")
		c, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		require.NoError(t, err)
		err = unix.Connect(c, &unix.SockaddrUnix{Name: path})
		if errors.Is(err, unix.EAGAIN) {
			unix.Close(c)
			return fd
		}
		require.NoError(t, err)
		t.Cleanup(func() { unix.Close(c) })
	}
}

// TestDialRetriesBusyBacklog: a dial that finds the listen backlog full
// (EAGAIN) is tried again, as libsanlock's blocking connect waits, and
// succeeds once the daemon accepts; with Timeout it gives up with -EAGAIN.
func TestDialRetriesBusyBacklog(t *testing.T) {
	dir, err := os.MkdirTemp("", "gsdial")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	lfd := fullBacklog(t, dir)

	cl, err := Dial(dir)
	require.NoError(t, err)
	cl.Timeout = 50 * time.Millisecond
	_, err = cl.connect(context.Background())
	require.ErrorIs(t, err, syscall.EAGAIN)
	require.Equal(t, -int(syscall.EAGAIN), ErrorCode(err))

	cl.Timeout = 0
	accepted := make(chan error, 1)
	go func() {
		time.Sleep(20 * time.Millisecond) // let the dial find the backlog full first
		nfd, _, err := unix.Accept(lfd)
		if err == nil {
			unix.Close(nfd)
		}
		accepted <- err
	}()
	conn, err := cl.connect(context.Background())
	require.NoError(t, err)
	conn.Close()
	require.NoError(t, <-accepted)
}
