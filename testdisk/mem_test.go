package testdisk_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/testdisk"
)

func TestMemReadWrite(t *testing.T) {
	ctx := context.Background()
	for _, ss := range []int{512, 4096} {
		m := testdisk.NewMem(int64(8*ss), ss)
		assert.Equal(t, ss, m.SectorSize())
		p := bytes.Repeat([]byte{0xab}, 2*ss)
		require.NoError(t, m.WriteAt(ctx, p, int64(ss)))
		got := make([]byte, 2*ss)
		require.NoError(t, m.ReadAt(ctx, got, int64(ss)))
		assert.Equal(t, p, got)

		img := m.Bytes()
		assert.Len(t, img, 8*ss)
		assert.Equal(t, make([]byte, ss), img[:ss])
		assert.Equal(t, p, img[ss:3*ss])
		img[ss] = 0 // a copy: the device is unchanged
		require.NoError(t, m.ReadAt(ctx, got, int64(ss)))
		assert.Equal(t, byte(0xab), got[0])

		// The caller's buffer is not retained.
		p[0] = 1
		require.NoError(t, m.ReadAt(ctx, got, int64(ss)))
		assert.Equal(t, byte(0xab), got[0])
	}
}

// TestMemAlignment: I/O that is not whole, aligned sectors fails with
// EINVAL as on an O_DIRECT device; in particular a 512-byte write on a 4K
// device (the case sanlock reports as -22).
func TestMemAlignment(t *testing.T) {
	ctx := context.Background()
	m := testdisk.NewMem(1<<20, 4096)
	for _, tc := range []struct {
		n   int
		off int64
	}{{512, 0}, {4096, 512}, {4097, 0}, {1, 0}, {4096, -4096}, {8192 + 512, 4096}} {
		err := m.WriteAt(ctx, make([]byte, tc.n), tc.off)
		assert.ErrorIs(t, err, syscall.EINVAL, "write %d@%d", tc.n, tc.off)
		assert.Equal(t, rescode.Code(-22), rescode.CodeOf(err))
		err = m.ReadAt(ctx, make([]byte, tc.n), tc.off)
		assert.ErrorIs(t, err, syscall.EINVAL, "read %d@%d", tc.n, tc.off)
	}
	m5 := testdisk.NewMem(1<<20, 512)
	assert.NoError(t, m5.WriteAt(ctx, make([]byte, 512), 512))
	assert.NoError(t, m5.WriteAt(ctx, make([]byte, 4096), 512), "4K writes are fine on a 512 device")
}

func TestMemEnd(t *testing.T) {
	ctx := context.Background()
	m := testdisk.NewMem(4096, 512)
	m.Load(bytes.Repeat([]byte{7}, 4096), 0)

	// A read crossing the end: data up to the end, zeros after, short-read error.
	got := bytes.Repeat([]byte{0xff}, 1024)
	err := m.ReadAt(ctx, got, 3584)
	require.Error(t, err)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.True(t, diskfmt.IsShortRead(err))
	assert.Equal(t, bytes.Repeat([]byte{7}, 512), got[:512])
	assert.Equal(t, make([]byte, 512), got[512:])

	// Entirely past the end: all zeros.
	got = bytes.Repeat([]byte{0xff}, 512)
	err = m.ReadAt(ctx, got, 8192)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Equal(t, make([]byte, 512), got)

	// A write crossing the end fails and changes nothing.
	err = m.WriteAt(ctx, make([]byte, 1024), 3584)
	assert.ErrorIs(t, err, syscall.ENOSPC)
	assert.Equal(t, bytes.Repeat([]byte{7}, 4096), m.Bytes())
}

func TestMemContextAndClose(t *testing.T) {
	m := testdisk.NewMem(4096, 512)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := m.WriteAt(ctx, make([]byte, 512), 0)
	assert.ErrorIs(t, err, rescode.ErrIOTimeout)
	assert.Equal(t, rescode.ErrAIOTimeout, rescode.CodeOf(err))
	err = m.ReadAt(ctx, make([]byte, 512), 0)
	assert.ErrorIs(t, err, rescode.ErrIOTimeout)

	m.Load([]byte{1, 2, 3}, 10)
	require.NoError(t, m.Close())
	err = m.ReadAt(context.Background(), make([]byte, 512), 0)
	assert.True(t, errors.Is(err, syscall.EBADF))
	err = m.WriteAt(context.Background(), make([]byte, 512), 0)
	assert.True(t, errors.Is(err, syscall.EBADF))
	assert.Equal(t, []byte{1, 2, 3}, m.Bytes()[10:13], "contents stay readable after Close")
}

// TestMemAtomicWrites: concurrent whole-sector writes never tear; every
// sector read back holds one writer's pattern.
func TestMemAtomicWrites(t *testing.T) {
	ctx := context.Background()
	m := testdisk.NewMem(8*4096, 4096)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := bytes.Repeat([]byte{byte(w + 1)}, 8*4096)
			for range 50 {
				if err := m.WriteAt(ctx, buf, 0); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		got := make([]byte, 8*4096)
		for range 200 {
			if err := m.ReadAt(ctx, got, 0); err != nil {
				t.Error(err)
				return
			}
			for _, c := range got {
				if c != got[0] {
					t.Error("torn multi-sector write observed")
					return
				}
			}
		}
	}()
	wg.Wait()
}

func TestMemIsDevice(t *testing.T) {
	var d diskfmt.Device = testdisk.NewMem(1<<20, 512)
	require.NoError(t, diskfmt.WriteLockspace(context.Background(), d, 0, 0, "LS", 10, 0))
	g, err := diskfmt.LockspaceGeometry(context.Background(), d, 0)
	require.NoError(t, err)
	assert.Equal(t, 512, g.SectorSize)
}
