package diskio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

// WithIOTimeout returns dev with every single read and write bounded by
// timeout (on top of any deadline the caller's context already has), so an
// operation of several I/Os gives each one the full io_timeout, as sanlock
// does.
func WithIOTimeout(dev diskfmt.Device, timeout time.Duration) diskfmt.Device {
	return timeoutDevice{Device: dev, timeout: timeout}
}

type timeoutDevice struct {
	diskfmt.Device
	timeout time.Duration
}

func (t timeoutDevice) ReadAt(ctx context.Context, p []byte, off int64) error {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	return t.Device.ReadAt(ctx, p, off)
}

func (t timeoutDevice) ReadBuf(ctx context.Context, n int, off int64) (*Buf, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	return ReadBuf(ctx, t.Device, n, off)
}

func (t timeoutDevice) WriteAt(ctx context.Context, p []byte, off int64) error {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	return t.Device.WriteAt(ctx, p, off)
}

// File is a Device over a regular file or block device opened with
// O_DIRECT|O_SYNC, as sanlock opens its disks. It is safe for concurrent
// use; one File may serve every lease on its disk.
//
// I/O goes through Linux native AIO when the kernel provides it (see
// aio.go), else through a synchronous fallback. Both bound what a hung disk
// can cost: at most maxInflight requests per device are in flight, stuck
// ones included, and while maxStuck timed-out requests are still pending
// no new request is started on the device; it waits for them up to its own
// deadline and then fails with ErrIOTimeout. With AIO a stuck request holds
// no thread; with the fallback each holds one, so at most maxStuck threads
// per device are ever stuck in the kernel.
type File struct {
	f          *os.File
	fd         int
	path       string
	sectorSize int
	aio        *aioEngine // nil: synchronous fallback

	sem     chan struct{} // in-flight tokens; a stuck request keeps its token
	stuckMu sync.Mutex
	stuck   int           // timed-out requests the kernel has not completed
	unstuck chan struct{} // closed (and reset) when stuck drops

	closeMu  sync.RWMutex
	closed   bool
	inflight atomic.Int32 // synchronous I/Os running, abandoned ones included
}

const (
	maxInflight = 16 // requests per device in flight at once, stuck ones included
	maxStuck    = 2  // timed-out requests per device before new ones wait
)

// OpenFile opens path for lease I/O. Files report 512-byte sectors; block
// devices report their logical block size (BLKSSZGET). Errors are the
// open/stat errno (e.g. ENOENT), so callers can map them to result codes.
func OpenFile(path string) (*File, error) {
	d, err := openFile(path)
	if err != nil {
		return nil, err
	}
	d.aio = sharedAIO()
	return d, nil
}

// OpenFileSync is OpenFile with the synchronous fallback (no native AIO),
// for tests and comparisons.
func OpenFileSync(path string) (*File, error) { return openFile(path) }

func openFile(path string) (*File, error) {
	// unix.Open and os.NewFile rather than os.OpenFile: the open is on the
	// path of every acquire (the resource disk is opened per lease, as
	// sanlock does), and os.OpenFile would try, and fail, to register the
	// regular file with the runtime's poller (four fcntl and an epoll_ctl).
	var fd int
	var err error
	for {
		fd, err = unix.Open(path, unix.O_RDWR|unix.O_SYNC|unix.O_DIRECT|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	ss := diskfmt.SectorSize512
	if st.Mode&unix.S_IFMT == unix.S_IFBLK {
		n, err := unix.IoctlGetInt(fd, unix.BLKSSZGET)
		if err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("%s: BLKSSZGET: %w", path, err)
		}
		if n > 0 {
			ss = n
		}
	}
	d := newFile(os.NewFile(uintptr(fd), path), path, ss)
	d.fd = fd
	return d, nil
}

func newFile(f *os.File, path string, ss int) *File {
	return &File{f: f, fd: -1, path: path, sectorSize: ss, sem: make(chan struct{}, maxInflight)}
}

// Path returns the path the device was opened with.
func (d *File) Path() string { return d.path }

// SectorSize implements Device.
func (d *File) SectorSize() int { return d.sectorSize }

// AIO reports whether the device uses native AIO.
func (d *File) AIO() bool { return d.aio != nil }

// Stuck returns how many timed-out I/Os on the device are still pending.
func (d *File) Stuck() int {
	d.stuckMu.Lock()
	defer d.stuckMu.Unlock()
	return d.stuck
}

// Close implements Device. Requests still in the kernel keep their own
// reference to the open file, so Close never waits for them: with
// synchronous I/O still stuck, the close itself happens in the background
// and Close returns at once, so a hung disk never holds up the caller.
func (d *File) Close() error {
	d.closeMu.Lock()
	if d.closed {
		d.closeMu.Unlock()
		return os.ErrClosed
	}
	d.closed = true
	d.closeMu.Unlock()
	if d.inflight.Load() > 0 {
		go func() { _ = d.f.Close() }()
		return nil
	}
	return d.f.Close()
}

// ReadAt implements Device.
func (d *File) ReadAt(ctx context.Context, p []byte, off int64) error {
	b := GetBuf(len(p))
	n, err := d.io(ctx, false, b, off)
	if err != nil {
		if !errors.Is(err, rescode.ErrIOTimeout) {
			b.Release()
		}
		return fmt.Errorf("read %s at %d: %w", d.path, off, err)
	}
	copy(p, b.Bytes()[:n])
	b.Release()
	if n < len(p) {
		clear(p[n:])
		return fmt.Errorf("read %s at %d: %d of %d bytes: %w", d.path, off, n, len(p), io.ErrUnexpectedEOF)
	}
	return nil
}

// ReadBuf implements BufReader: the read lands directly in a pooled aligned
// buffer that the caller releases. Any error, a short read included,
// returns no buffer.
func (d *File) ReadBuf(ctx context.Context, n int, off int64) (*Buf, error) {
	b := getBufFor(ctx, n)
	got, err := d.io(ctx, false, b, off)
	if err != nil {
		if errors.Is(err, rescode.ErrIOTimeout) {
			b.endTurn() // b stays with the request, its turn does not
		} else {
			b.Release()
		}
		return nil, fmt.Errorf("read %s at %d: %w", d.path, off, err)
	}
	if got < n {
		b.Release()
		return nil, fmt.Errorf("read %s at %d: %d of %d bytes: %w", d.path, off, got, n, io.ErrUnexpectedEOF)
	}
	return b, nil
}

// WriteAt implements Device.
func (d *File) WriteAt(ctx context.Context, p []byte, off int64) error {
	b := GetBuf(len(p))
	copy(b.Bytes(), p)
	n, err := d.io(ctx, true, b, off)
	if err == nil {
		b.Release()
		if n < len(p) {
			err = io.ErrShortWrite
		}
	} else if !errors.Is(err, rescode.ErrIOTimeout) {
		b.Release()
	}
	if err != nil {
		return fmt.Errorf("write %s at %d: %w", d.path, off, err)
	}
	return nil
}

// io performs one read or write of b at off. On a timeout the request owns
// b from then on: the caller must neither reuse nor release it.
func (d *File) io(ctx context.Context, write bool, b *Buf, off int64) (int, error) {
	if off < 0 {
		return 0, unix.EINVAL
	}
	if err := d.admit(ctx); err != nil {
		return 0, err
	}
	if d.aio != nil {
		return d.aio.do(ctx, d, write, b, off)
	}
	call := unix.Pread
	if write {
		call = unix.Pwrite
	}
	return d.syncRun(ctx, func() (int, error) { return d.sysIO(call, b.Bytes(), off) })
}

// admit takes an in-flight token for one request, waiting (until ctx is
// done) while the device has maxStuck timed-out requests still pending or
// maxInflight requests in flight.
func (d *File) admit(ctx context.Context) error {
	if ctx.Err() != nil {
		return timeoutErr(ctx)
	}
	for {
		d.stuckMu.Lock()
		if d.stuck < maxStuck {
			d.stuckMu.Unlock()
			break
		}
		if d.unstuck == nil {
			d.unstuck = make(chan struct{})
		}
		ch, n := d.unstuck, d.stuck
		d.stuckMu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: %d earlier I/Os on %s still pending: %v", rescode.ErrIOTimeout, n, d.path, context.Cause(ctx))
		}
	}
	select {
	case d.sem <- struct{}{}:
		return nil
	default:
	}
	select {
	case d.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return timeoutErr(ctx)
	}
}

// release gives back an in-flight token.
func (d *File) release() { <-d.sem }

// stick counts a request that timed out and is still in the kernel.
func (d *File) stick() {
	d.stuckMu.Lock()
	d.stuck++
	d.stuckMu.Unlock()
}

// unstick ends a stuck request: the kernel completed it at last.
func (d *File) unstick() {
	d.stuckMu.Lock()
	d.stuck--
	if d.unstuck != nil {
		close(d.unstuck)
		d.unstuck = nil
	}
	d.stuckMu.Unlock()
	d.release()
}

// sysIO makes one pread or pwrite call (retrying EINTR) while holding a
// reference on the descriptor, so a concurrent Close cannot recycle it.
// A single call, not a loop: O_DIRECT needs the aligned whole buffer, and a
// short count means end of device.
func (d *File) sysIO(call func(int, []byte, int64) (int, error), buf []byte, off int64) (int, error) {
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

// syncReq is one request of the synchronous fallback.
type syncReq struct {
	n         int
	err       error
	finished  bool // guarded by File.stuckMu
	abandoned bool // guarded by File.stuckMu
	done      chan struct{}
}

// syncRun is the synchronous fallback: op runs on its own goroutine so the
// caller can give up at the context deadline. The caller holds an
// in-flight token, which syncRun gives back when op returns (for an
// abandoned op, whenever that is). op owns its buffer; after a timeout
// nobody else touches that buffer again.
func (d *File) syncRun(ctx context.Context, op func() (int, error)) (int, error) {
	if ctx.Done() == nil {
		d.inflight.Add(1)
		n, err := op()
		d.inflight.Add(-1)
		d.release()
		return n, err
	}
	r := &syncReq{done: make(chan struct{})}
	d.inflight.Add(1)
	go func() {
		n, err := op()
		d.inflight.Add(-1)
		d.stuckMu.Lock()
		r.n, r.err, r.finished = n, err, true
		abandoned := r.abandoned
		d.stuckMu.Unlock()
		if abandoned {
			d.unstick()
			return
		}
		close(r.done)
	}()
	select {
	case <-r.done:
		d.release()
		return r.n, r.err
	case <-ctx.Done():
	}
	d.stuckMu.Lock()
	if r.finished {
		d.stuckMu.Unlock()
		<-r.done
		d.release()
		return r.n, r.err
	}
	r.abandoned = true
	d.stuck++
	d.stuckMu.Unlock()
	return 0, timeoutErr(ctx)
}

// run is syncRun with admission, for tests of the fallback.
func (d *File) run(ctx context.Context, op func() (int, error)) (int, error) {
	if err := d.admit(ctx); err != nil {
		return 0, err
	}
	return d.syncRun(ctx, op)
}

// BufReader is a Device that can read straight into a pooled buffer.
type BufReader interface {
	// ReadBuf reads n bytes at off into a pooled aligned buffer that the
	// caller must Release. Any error returns no buffer.
	ReadBuf(ctx context.Context, n int, off int64) (*Buf, error)
}

// ReadBuf reads n bytes at off from dev into a pooled buffer, without a
// copy when dev is a BufReader. The caller releases the buffer when done
// with its bytes. A failed read returns no buffer; after a timeout the
// buffer is abandoned, never pooled again.
func ReadBuf(ctx context.Context, dev diskfmt.Device, n int, off int64) (*Buf, error) {
	if br, ok := dev.(BufReader); ok {
		return br.ReadBuf(ctx, n, off)
	}
	// A device that gives up on its context may go on filling the bare
	// slice: the bytes must stay valid as long as it holds them. Heap bytes
	// do (the slice keeps them alive); a huge-page region would not (it is
	// unmapped once no Buf of it is reachable). So this path never reads
	// into a region: the sizes that would get one are read into a heap
	// block of their own, not pooled.
	var b *Buf
	if classOf(n) >= hugeMinClass {
		b = &Buf{b: alignedBlock(roundUp(n, alignBytes)), n: n, class: -1}
	} else {
		b = GetBuf(n)
	}
	if err := dev.ReadAt(ctx, b.Bytes(), off); err != nil {
		// After a deadline or cancel, b is dropped, never pooled.
		if !errors.Is(err, rescode.ErrIOTimeout) && !errors.Is(err, context.DeadlineExceeded) &&
			!errors.Is(err, context.Canceled) {
			b.Release()
		}
		return nil, err
	}
	return b, nil
}

func roundUp(n, to int) int {
	if n <= 0 {
		return to
	}
	return (n + to - 1) / to * to
}
