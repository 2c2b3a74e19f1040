package diskfmt

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestRunTimeoutAbandonsBuffer checks the I/O timeout contract: a call that
// outlives its deadline returns ErrIOTimeout at once, and the operation that
// completes later writes only into its own buffer, never the caller's.
func TestRunTimeoutAbandonsBuffer(t *testing.T) {
	d := &File{path: "test"}
	release := make(chan struct{})
	finished := make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()

	own := make([]byte, 8)
	start := time.Now()
	_, err := d.run(ctx, func() (int, error) {
		<-release
		for i := range own {
			own[i] = 0xAA // the late completion touches only its own buffer
		}
		close(finished)
		return len(own), nil
	})
	require.ErrorIs(t, err, ErrIOTimeout)
	require.Equal(t, ErrAIOTimeout, CodeOf(err))
	require.Less(t, time.Since(start), 2*time.Second)

	close(release)
	<-finished
}

func TestFileReadWriteAndShortRead(t *testing.T) {
	dir, err := os.MkdirTemp("/var/tmp", "gs-diskfmt-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "leases")
	require.NoError(t, os.WriteFile(path, make([]byte, 8192), 0o644))

	d, err := OpenFile(path)
	if err != nil {
		t.Skipf("O_DIRECT not supported here: %v", err)
	}
	defer d.Close()
	require.Equal(t, 512, d.SectorSize())

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	w := make([]byte, 512)
	for i := range w {
		w[i] = byte(i)
	}
	require.NoError(t, d.WriteAt(ctx, w, 4096))
	r := make([]byte, 512)
	require.NoError(t, d.ReadAt(ctx, r, 4096))
	require.Equal(t, w, r)

	// A read that runs past the end fills zeros and reports a short read.
	r = make([]byte, 1024)
	for i := range r {
		r[i] = 0xFF
	}
	err = d.ReadAt(ctx, r, 7680)
	require.True(t, IsShortRead(err), "err = %v", err)
	require.Equal(t, make([]byte, 512), r[512:])

	// Unaligned I/O is refused by O_DIRECT with EINVAL (-22).
	err = d.WriteAt(ctx, make([]byte, 100), 0)
	require.Error(t, err)
	require.Equal(t, ErrEINVAL, CodeOf(err))

	_, err = OpenFile(filepath.Join(dir, "missing"))
	require.True(t, errors.Is(err, os.ErrNotExist))
}

// hangDevice blocks every I/O until its context ends.
type hangDevice struct{ Device }

func (hangDevice) ReadAt(ctx context.Context, _ []byte, _ int64) error {
	<-ctx.Done()
	return ErrIOTimeout
}

func (hangDevice) WriteAt(ctx context.Context, _ []byte, _ int64) error {
	<-ctx.Done()
	return ErrIOTimeout
}

// TestWithIOTimeout: each single I/O ends at its own io_timeout even when
// the caller's context has no deadline at all.
func TestWithIOTimeout(t *testing.T) {
	dev := WithIOTimeout(hangDevice{}, 30*time.Millisecond)
	for _, op := range []func() error{
		func() error { return dev.ReadAt(context.Background(), make([]byte, 512), 0) },
		func() error { return dev.WriteAt(context.Background(), make([]byte, 512), 0) },
	} {
		start := time.Now()
		require.ErrorIs(t, op(), ErrIOTimeout)
		require.Less(t, time.Since(start), 2*time.Second)
	}
}

// TestCloseDoesNotWaitForAbandonedIO: closing a device while an I/O that
// timed out is still stuck in the kernel returns at once (the descriptor
// is closed once that I/O ends), so a hung disk cannot hold up its owner.
func TestCloseDoesNotWaitForAbandonedIO(t *testing.T) {
	// A pollable descriptor (as a FUSE file is): closing it waits for the
	// references that running operations hold.
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	require.NoError(t, err)
	defer unix.Close(fds[1])
	require.NoError(t, unix.SetNonblock(fds[0], true))
	d := &File{f: os.NewFile(uintptr(fds[0]), "sock"), path: "sock"}
	rc, err := d.f.SyscallConn()
	require.NoError(t, err)

	release := make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = d.run(ctx, func() (int, error) {
		// Holds a reference on the descriptor, as a pread stuck in the
		// kernel does.
		return 0, rc.Read(func(uintptr) bool { <-release; return true })
	})
	require.ErrorIs(t, err, ErrIOTimeout)

	closed := make(chan error, 1)
	go func() { closed <- d.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(2 * time.Second):
		close(release)
		t.Fatal("Close waited for the abandoned I/O")
	}
	close(release)
}
