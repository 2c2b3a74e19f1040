package diskio

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

// TestRunTimeoutAbandonsBuffer checks the I/O timeout contract: a call that
// outlives its deadline returns ErrIOTimeout at its deadline (the bubble's
// clock), and the operation that completes later writes only into its own
// buffer, never the caller's.
func TestRunTimeoutAbandonsBuffer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newFile(nil, "test", 512)
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
		require.ErrorIs(t, err, rescode.ErrIOTimeout)
		require.Equal(t, rescode.ErrAIOTimeout, rescode.CodeOf(err))
		require.Equal(t, 20*time.Millisecond, time.Since(start))
		require.Equal(t, 1, d.Stuck())

		close(release)
		<-finished
		synctest.Wait()
		require.Equal(t, 0, d.Stuck())
	})
}

func TestFileReadWriteAndShortRead(t *testing.T) {
	dir, err := os.MkdirTemp("/var/tmp", "gs-diskio-")
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
	require.True(t, diskfmt.IsShortRead(err), "err = %v", err)
	require.Equal(t, make([]byte, 512), r[512:])

	// Unaligned I/O is refused by O_DIRECT with EINVAL (-22).
	err = d.WriteAt(ctx, make([]byte, 100), 0)
	require.Error(t, err)
	require.Equal(t, rescode.ErrEINVAL, rescode.CodeOf(err))

	_, err = OpenFile(filepath.Join(dir, "missing"))
	require.True(t, errors.Is(err, os.ErrNotExist))
}

// hangDevice blocks every I/O until its context ends.
type hangDevice struct{ diskfmt.Device }

func (hangDevice) ReadAt(ctx context.Context, _ []byte, _ int64) error {
	<-ctx.Done()
	return rescode.ErrIOTimeout
}

func (hangDevice) WriteAt(ctx context.Context, _ []byte, _ int64) error {
	<-ctx.Done()
	return rescode.ErrIOTimeout
}

// TestWithIOTimeout: each single I/O ends at its own io_timeout (the
// bubble's clock) even when the caller's context has no deadline at all.
func TestWithIOTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dev := WithIOTimeout(hangDevice{}, 30*time.Millisecond)
		for _, op := range []func() error{
			func() error { return dev.ReadAt(context.Background(), make([]byte, 512), 0) },
			func() error { return dev.WriteAt(context.Background(), make([]byte, 512), 0) },
		} {
			start := time.Now()
			require.ErrorIs(t, op(), rescode.ErrIOTimeout)
			require.Equal(t, 30*time.Millisecond, time.Since(start))
		}
	})
}

// TestCloseDoesNotWaitForAbandonedIO: closing a device while an I/O that
// timed out is still stuck in the kernel returns at once (the descriptor
// is closed once that I/O ends), so a hung disk cannot hold up its owner.
// Close is called while the stuck I/O still holds its reference: were it
// to wait for that I/O, the test would never end.
func TestCloseDoesNotWaitForAbandonedIO(t *testing.T) {
	// A pollable descriptor (as a FUSE file is): closing it waits for the
	// references that running operations hold.
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	require.NoError(t, err)
	defer unix.Close(fds[1])
	require.NoError(t, unix.SetNonblock(fds[0], true))
	d := newFile(os.NewFile(uintptr(fds[0]), "sock"), "sock", 512)
	rc, err := d.f.SyscallConn()
	require.NoError(t, err)

	release := make(chan struct{})
	holding := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-holding; cancel() }()
	_, err = d.run(ctx, func() (int, error) {
		// Holds a reference on the descriptor, as a pread stuck in the
		// kernel does.
		return 0, rc.Read(func(uintptr) bool { close(holding); <-release; return true })
	})
	require.ErrorIs(t, err, rescode.ErrIOTimeout)
	require.Equal(t, 1, d.Stuck())

	require.NoError(t, d.Close())
	require.Equal(t, 1, d.Stuck(), "the abandoned I/O ended before Close returned")
	close(release)
}

// TestFileSyncFallback: the synchronous fallback reads and writes like the
// AIO path.
func TestFileSyncFallback(t *testing.T) {
	dir, err := os.MkdirTemp("/var/tmp", "gs-diskio-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "leases")
	require.NoError(t, os.WriteFile(path, make([]byte, 8192), 0o644))
	for _, open := range []func(string) (*File, error){OpenFile, OpenFileSync} {
		d, err := open(path)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		w := make([]byte, 1024)
		for i := range w {
			w[i] = byte(i * 7)
		}
		require.NoError(t, d.WriteAt(ctx, w, 512))
		b, err := ReadBuf(ctx, d, 1024, 512)
		require.NoError(t, err)
		require.Equal(t, w, b.Bytes())
		b.Release()
		_, err = ReadBuf(ctx, d, 1024, 7680)
		require.True(t, diskfmt.IsShortRead(err), "err = %v", err)
		// A misaligned buffer length fails with EINVAL on both paths.
		err = d.WriteAt(ctx, make([]byte, 100), 0)
		require.Equal(t, rescode.ErrEINVAL, rescode.CodeOf(err))
		cancel()
		require.NoError(t, d.Close())
	}
}

// TestStuckLimit: while maxStuck timed-out I/Os of a device are still
// pending, a new I/O is not started at all; it fails with ErrIOTimeout at
// its own deadline. Once one of them completes, I/O starts again.
func TestStuckLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newFile(nil, "test", 512)
		release := make(chan struct{})
		var started atomic.Int32
		hang := func() (int, error) {
			started.Add(1)
			<-release
			return 0, nil
		}
		for range maxStuck + 3 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			start := time.Now()
			_, err := d.run(ctx, hang)
			cancel()
			require.ErrorIs(t, err, rescode.ErrIOTimeout)
			require.Equal(t, 10*time.Millisecond, time.Since(start))
		}
		require.EqualValues(t, maxStuck, started.Load(), "I/Os started on a device with stuck ones")
		require.Equal(t, maxStuck, d.Stuck())
		close(release)
		synctest.Wait()
		require.Equal(t, 0, d.Stuck())
		n, err := d.run(context.Background(), func() (int, error) { return 7, nil })
		require.NoError(t, err)
		require.Equal(t, 7, n)
		require.Len(t, d.sem, 0)
	})
}

// TestPoolClasses: buffers are aligned, sized by power-of-two classes and
// reused after Release.
func TestPoolClasses(t *testing.T) {
	for _, n := range []int{1, 512, 4096, 4097, 1 << 20, 1025024, 8 << 20, 40 << 20} {
		b := GetBuf(n)
		require.Len(t, b.Bytes(), n)
		require.Zero(t, uintptr(unsafe.Pointer(unsafe.SliceData(b.Bytes())))%alignBytes)
		b.Release()
	}
	a := GetBuf(1 << 20)
	a.Release()
	require.Same(t, a, GetBuf(1<<20-512))
	allocs := testing.AllocsPerRun(100, func() { GetBuf(1 << 20).Release() })
	require.Zero(t, allocs)
}
