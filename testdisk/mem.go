// Package testdisk provides lease storage for tests: an in-memory device
// that behaves like an O_DIRECT disk (whole, aligned sectors; atomic
// single-sector writes), shared by any number of simulated hosts.
package testdisk

import (
	"context"
	"fmt"
	"io"
	"sync"
	"syscall"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

// Mem is an in-memory diskfmt.Device of fixed size. It rejects I/O whose
// offset or length is not a multiple of its sector size with EINVAL, as an
// O_DIRECT device does, and reads past the end return zeros and a short-read
// error. It is safe for concurrent use; each call is atomic.
type Mem struct {
	mu         sync.Mutex
	data       []byte
	sectorSize int
	closed     bool
}

var _ diskfmt.Device = (*Mem)(nil)

// NewMem returns a zeroed device of size bytes with the given sector size.
func NewMem(size int64, sectorSize int) *Mem {
	return &Mem{data: make([]byte, size), sectorSize: sectorSize}
}

// SectorSize implements diskfmt.Device.
func (m *Mem) SectorSize() int { return m.sectorSize }

// Close implements diskfmt.Device. The contents stay readable through Bytes.
func (m *Mem) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

func (m *Mem) check(ctx context.Context, n int, off int64) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %v", rescode.ErrIOTimeout, err)
	}
	if m.closed {
		return syscall.EBADF
	}
	ss := int64(m.sectorSize)
	if off < 0 || off%ss != 0 || int64(n)%ss != 0 {
		return syscall.EINVAL
	}
	return nil
}

// ReadAt implements diskfmt.Device.
func (m *Mem) ReadAt(ctx context.Context, p []byte, off int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx, len(p), off); err != nil {
		return err
	}
	var n int
	if off < int64(len(m.data)) {
		n = copy(p, m.data[off:])
	}
	if n < len(p) {
		clear(p[n:])
		return fmt.Errorf("mem read at %d: %w", off, io.ErrUnexpectedEOF)
	}
	return nil
}

// WriteAt implements diskfmt.Device. Writes past the end fail with ENOSPC
// and change nothing.
func (m *Mem) WriteAt(ctx context.Context, p []byte, off int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(ctx, len(p), off); err != nil {
		return err
	}
	if off+int64(len(p)) > int64(len(m.data)) {
		return syscall.ENOSPC
	}
	copy(m.data[off:], p)
	return nil
}

// Bytes returns a copy of the device contents.
func (m *Mem) Bytes() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]byte(nil), m.data...)
}

// Load replaces the contents from off with b (for tests that start from an
// image).
func (m *Mem) Load(b []byte, off int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	copy(m.data[off:], b)
}
