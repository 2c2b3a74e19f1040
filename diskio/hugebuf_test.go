package diskio

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"

	"github.com/gosanlock/gosanlock/rescode"
)

// TestHugeBufs: buffers of 1 MiB and more come from 2 MiB-aligned regions
// (two 1 MiB buffers per region, a larger one spanning whole huge pages),
// work for O_DIRECT reads, and go back to the pool like any other.
func TestHugeBufs(t *testing.T) {
	if hugeOff.Load() {
		t.Skip("huge-page regions are off in this process")
	}
	for _, size := range []int{1 << 20, 4 << 20} {
		blocks, r := hugeBlocks(size)
		if blocks == nil {
			t.Fatalf("hugeBlocks(%d) failed", size)
		}
		if want := max(hugeSize/size, 1); len(blocks) != want {
			t.Fatalf("size %d: %d blocks, want %d", size, len(blocks), want)
		}
		for i, b := range blocks {
			addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
			if len(b) != size || cap(b) != size || addr%uintptr(min(size, hugeSize)) != 0 {
				t.Fatalf("size %d block %d: len %d cap %d at %#x", size, i, len(b), cap(b), addr)
			}
			b[0], b[size-1] = 1, 2 // mapped and writable
		}
		runtime.KeepAlive(r)
	}

	// Through the pool: an O_DIRECT read into a huge-page buffer.
	dir := t.TempDir()
	if fi, err := os.Stat("/var/tmp"); err == nil && fi.IsDir() {
		d, err := os.MkdirTemp("/var/tmp", "hugebuf")
		if err == nil {
			dir = d
			t.Cleanup(func() { os.RemoveAll(d) })
		}
	}
	path := filepath.Join(dir, "f")
	want := make([]byte, 1<<20)
	for i := range want {
		want[i] = byte(i * 7)
	}
	if err := os.WriteFile(path, want, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := OpenFile(path)
	if err != nil {
		t.Skipf("open %s: %v", path, err)
	}
	defer f.Close()
	b, err := f.ReadBuf(t.Context(), 1<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	if b.region == nil {
		t.Fatalf("a 1 MiB buffer is not from a huge-page region")
	}
	if string(b.Bytes()) != string(want) {
		t.Fatalf("read back differs")
	}
	b.Release()
	if s := GetBuf(64 << 10); s.region != nil {
		t.Fatalf("a 64 KiB buffer came from a huge-page region")
	}
}

// lateDevice gives up on its context at once but keeps the slice it was
// handed, as a device that goes on filling it in the background would.
type lateDevice struct{ kept []byte }

func (d *lateDevice) ReadAt(ctx context.Context, p []byte, off int64) error {
	d.kept = p
	return rescode.ErrIOTimeout
}
func (d *lateDevice) WriteAt(context.Context, []byte, int64) error { return nil }
func (d *lateDevice) SectorSize() int                              { return 512 }
func (d *lateDevice) Close() error                                 { return nil }

// zeroDevice reads zeros.
type zeroDevice struct{ lateDevice }

func (*zeroDevice) ReadAt(_ context.Context, p []byte, _ int64) error { clear(p); return nil }

// TestHugeBufAbandoned: a read that timed out on a Device that is not a
// BufReader drops its buffer, which is heap memory, so the device's late
// write into the bytes it kept is harmless; such a read never gets a
// huge-page region's buffer, which is unmapped once unreachable.
func TestHugeBufAbandoned(t *testing.T) {
	d := &lateDevice{}
	if _, err := ReadBuf(t.Context(), d, 1<<20, 0); err == nil {
		t.Fatal("read did not fail")
	}
	for range 3 {
		runtime.GC()
	}
	d.kept[0], d.kept[len(d.kept)-1] = 1, 2 // the late write: still valid memory
	// The generic path never hands a non-BufReader device a region's
	// buffer, whose mapping would go when the Buf is unreachable.
	b, err := ReadBuf(t.Context(), &zeroDevice{}, 1<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	if b.region != nil {
		t.Fatal("a generic read got a huge-page region's buffer")
	}
	b.Release()
}
