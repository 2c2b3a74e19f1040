package diskfmt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/ncw/directio"
	"golang.org/x/sys/unix"
)

// Device is shared lease storage: a block device or a file, read and written
// in whole sectors. Every call takes a context whose deadline is the I/O
// timeout; a call that is still running at the deadline returns an error
// wrapping ErrIOTimeout, and the buffer the I/O was using is abandoned (never
// reused), so a late completion cannot corrupt later data.
//
// Offsets and lengths should be multiples of SectorSize; a device rejects
// what its hardware would (an O_DIRECT device returns EINVAL for a 512-byte
// write on a 4K device, exactly as sanlock sees it).
type Device interface {
	// ReadAt fills p from offset off. A read that ends past the end of the
	// device fills the rest of p with zeros and returns an error wrapping
	// io.ErrUnexpectedEOF.
	ReadAt(ctx context.Context, p []byte, off int64) error
	// WriteAt writes all of p at offset off.
	WriteAt(ctx context.Context, p []byte, off int64) error
	// SectorSize is the device's logical sector size (512 for files).
	SectorSize() int
	Close() error
}

// WithIOTimeout returns dev with every single read and write bounded by
// timeout (on top of any deadline the caller's context already has), so an
// operation of several I/Os gives each one the full io_timeout, as sanlock
// does.
func WithIOTimeout(dev Device, timeout time.Duration) Device {
	return timeoutDevice{Device: dev, timeout: timeout}
}

type timeoutDevice struct {
	Device
	timeout time.Duration
}

func (t timeoutDevice) ReadAt(ctx context.Context, p []byte, off int64) error {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	return t.Device.ReadAt(ctx, p, off)
}

func (t timeoutDevice) WriteAt(ctx context.Context, p []byte, off int64) error {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	return t.Device.WriteAt(ctx, p, off)
}

// ErrIOTimeout is returned (wrapped) by a Device call that outlived its
// context deadline.
var ErrIOTimeout = errors.New("disk I/O timed out")

// File is a Device over a regular file or block device opened with
// O_DIRECT|O_SYNC, as sanlock opens its disks.
type File struct {
	f          *os.File
	path       string
	sectorSize int
	inflight   atomic.Int32 // I/Os running, abandoned ones included
}

// OpenFile opens path for lease I/O. Files report 512-byte sectors; block
// devices report their logical block size (BLKSSZGET). Errors are the
// open/stat errno (e.g. ENOENT), so callers can map them to result codes.
func OpenFile(path string) (*File, error) {
	f, err := directio.OpenFile(path, os.O_RDWR|unix.O_SYNC, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	ss := SectorSize512
	if st.Mode()&os.ModeDevice != 0 && st.Mode()&os.ModeCharDevice == 0 {
		n, err := unix.IoctlGetInt(int(f.Fd()), unix.BLKSSZGET)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: BLKSSZGET: %w", path, err)
		}
		if n > 0 {
			ss = n
		}
	}
	return &File{f: f, path: path, sectorSize: ss}, nil
}

// Path returns the path the device was opened with.
func (d *File) Path() string { return d.path }

// SectorSize implements Device.
func (d *File) SectorSize() int { return d.sectorSize }

// Close implements Device. I/O abandoned after a timeout keeps the
// descriptor alive until it finishes (os.File reference counting), and
// closing would wait for it; with such I/O in flight the close happens in
// the background and Close returns at once, so a hung disk never holds up
// the caller.
func (d *File) Close() error {
	if d.inflight.Load() > 0 {
		go func() { _ = d.f.Close() }()
		return nil
	}
	return d.f.Close()
}

type ioResult struct {
	n   int
	err error
}

// ReadAt implements Device.
func (d *File) ReadAt(ctx context.Context, p []byte, off int64) error {
	buf := directio.AlignedBlock(roundUp(len(p), directio.AlignSize))[:len(p)]
	n, err := d.run(ctx, func() (int, error) { return d.sysIO(unix.Pread, buf, off) })
	if err != nil {
		return fmt.Errorf("read %s at %d: %w", d.path, off, err)
	}
	copy(p, buf[:n])
	if n < len(p) {
		clear(p[n:])
		return fmt.Errorf("read %s at %d: %d of %d bytes: %w", d.path, off, n, len(p), io.ErrUnexpectedEOF)
	}
	return nil
}

// WriteAt implements Device.
func (d *File) WriteAt(ctx context.Context, p []byte, off int64) error {
	buf := directio.AlignedBlock(roundUp(len(p), directio.AlignSize))[:len(p)]
	copy(buf, p)
	n, err := d.run(ctx, func() (int, error) { return d.sysIO(unix.Pwrite, buf, off) })
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return fmt.Errorf("write %s at %d: %w", d.path, off, err)
	}
	return nil
}

// sysIO makes one pread or pwrite call (retrying EINTR) while holding a
// reference on the descriptor, so a concurrent Close cannot recycle it.
// A single call, not a loop: O_DIRECT needs the aligned whole buffer, and a
// short count means end of device.
func (d *File) sysIO(call func(int, []byte, int64) (int, error), buf []byte, off int64) (int, error) {
	if off < 0 {
		return 0, unix.EINVAL
	}
	rc, err := d.f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var ioErr error
	cerr := rc.Control(func(fd uintptr) {
		for {
			n, ioErr = call(int(fd), buf, off)
			if ioErr != unix.EINTR {
				return
			}
		}
	})
	if cerr != nil {
		return 0, cerr
	}
	if n < 0 {
		n = 0
	}
	return n, ioErr
}

// run performs op on its own goroutine so the caller can give up at the
// context deadline. op owns its buffer; after a timeout nobody else touches
// that buffer again.
func (d *File) run(ctx context.Context, op func() (int, error)) (int, error) {
	d.inflight.Add(1)
	if ctx.Done() == nil {
		defer d.inflight.Add(-1)
		return op()
	}
	if err := ctx.Err(); err != nil {
		d.inflight.Add(-1)
		return 0, fmt.Errorf("%w: %v", ErrIOTimeout, err)
	}
	done := make(chan ioResult, 1)
	go func() {
		defer d.inflight.Add(-1)
		n, err := op()
		done <- ioResult{n, err}
	}()
	select {
	case r := <-done:
		return r.n, r.err
	case <-ctx.Done():
		return 0, fmt.Errorf("%w: %v", ErrIOTimeout, ctx.Err())
	}
}

func roundUp(n, to int) int {
	if n <= 0 {
		return to
	}
	return (n + to - 1) / to * to
}
