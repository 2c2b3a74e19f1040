// Package fusefault is a fault-injecting passthrough filesystem for tests
// that run real processes (the C sanlock, our daemon, client programs) on
// shared lease files.
//
// Mount serves the regular files of one backing directory (on a real disk
// filesystem, e.g. under /var/tmp) at a mount point through the kernel's
// FUSE interface. Several mounts of the same backing directory give each
// emulated host its own view of the same bytes, so a test can make one
// host's storage fail (EIO), hang, or slow down while the others keep
// working: SetFault switches the behaviour of one mount at any time.
//
// The server speaks the FUSE protocol directly over /dev/fuse (no fuse
// library, no fusermount: it mounts with mount(2), so it needs root). It is
// written for lease I/O:
//
//   - every open is answered with FOPEN_DIRECT_IO, so the kernel keeps no page
//     cache for the mount: every read and write of every process reaches
//     the backing file, and writes through one mount are seen at once
//     through every other mount (the backing file's own page cache is shared
//     by all of them);
//   - O_DIRECT opens work, and the connection negotiates ASYNC_DIO, so
//     libaio's io_submit on the mount returns at once and a hung request
//     looks to the caller like a hung disk (io_getevents times out), as
//     sanlock expects;
//   - each request is served in its own goroutine, so a hung request blocks
//     nothing else.
//
// Limits: flat directory of regular files only (no create, unlink, rename,
// truncate or chmod through the mount: prepare files in the backing
// directory); file sizes are those of the backing files; writes are not
// torn (a write reaches the backing file whole, or not at all when it is
// faulted); no fault survives Close.
package fusefault

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Ops selects which requests a Fault applies to.
type Ops uint8

const (
	// Reads selects READ requests.
	Reads Ops = 1 << iota
	// Writes selects WRITE and FSYNC requests.
	Writes
	// AllOps selects reads, writes and fsyncs.
	AllOps = Reads | Writes
)

// Mode is what a Fault does to a selected request.
type Mode int

const (
	// None serves requests normally.
	None Mode = iota
	// Error fails the request with Fault.Errno (EIO by default). Nothing
	// reaches the backing file.
	Error
	// Hang holds the request until the fault is changed (SetFault) or the
	// mount is closed; then the request is served under the new fault.
	Hang
	// Delay serves the request after Fault.Delay.
	Delay
)

func (m Mode) String() string {
	switch m {
	case None:
		return "none"
	case Error:
		return "error"
	case Hang:
		return "hang"
	case Delay:
		return "delay"
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

// Fault describes the behaviour of one mount.
type Fault struct {
	Mode  Mode
	Ops   Ops           // which requests; 0 means AllOps
	Errno syscall.Errno // for Error; 0 means EIO
	Delay time.Duration // for Delay
	File  string        // only requests on this file name; "" means every file
}

func (f Fault) String() string {
	s := f.Mode.String()
	switch f.Mode {
	case Error:
		s += "(" + f.errno().Error() + ")"
	case Delay:
		s += "(" + f.Delay.String() + ")"
	}
	if f.Ops != 0 && f.Ops != AllOps {
		if f.Ops == Reads {
			s += " reads"
		} else {
			s += " writes"
		}
	}
	if f.File != "" {
		s += " on " + f.File
	}
	return s
}

func (f Fault) errno() syscall.Errno {
	if f.Errno == 0 {
		return syscall.EIO
	}
	return f.Errno
}

func (f Fault) applies(op Ops, name string) bool {
	if f.Mode == None {
		return false
	}
	ops := f.Ops
	if ops == 0 {
		ops = AllOps
	}
	return ops&op != 0 && (f.File == "" || f.File == name)
}

// Stats counts the requests a mount served. Faulted requests are counted
// in Errors, Hung or Delayed (a hung request that is later served counts
// in Reads/Writes too).
type Stats struct {
	Reads, Writes, Fsyncs int64
	Errors, Hung, Delayed int64
	BytesRead, BytesWrote int64
}

// FS is one mounted view of a backing directory.
type FS struct {
	// Dir is the mount point; files of the backing directory appear in it.
	Dir     string
	backing string
	opts    Options

	devMu     sync.RWMutex
	dev       int // /dev/fuse, non-blocking; -1 once closed
	stopRead  atomic.Bool
	readerEnd chan struct{}

	mu      sync.Mutex
	fault   Fault
	changed chan struct{} // closed (and replaced) on every SetFault and on Close
	closing bool
	nodes   map[string]*node
	byID    map[uint64]*node
	nextID  uint64

	reads, writes, fsyncs atomic.Int64
	errs, hung, delayed   atomic.Int64
	bytesRead, bytesWrote atomic.Int64

	wg       sync.WaitGroup
	initDone chan struct{}
	initOnce sync.Once

	traceMu sync.Mutex
	tracing bool
	trace   []Request
}

// Request is one READ, WRITE or FSYNC the mount received, as recorded by
// the request log (StartTrace).
type Request struct {
	Op   string // "read", "write" or "fsync"
	File string
	Off  uint64
	Size uint32
	// PID is the pid of the process the kernel sent the request for (for
	// asynchronous I/O, the one that submitted it).
	PID uint32
	// Arrived and Done are CLOCK_MONOTONIC nanoseconds: when the server
	// read the request, and when it answered it.
	Arrived, Done int64
	// Held is set when a Hang fault held the request before it was
	// answered.
	Held bool
	// Errno is the answer's error (0: served).
	Errno syscall.Errno
	// Head is the first 512 bytes of a write's data (a sector).
	Head []byte
}

// StartTrace clears the request log and starts recording every READ,
// WRITE and FSYNC into it when it is answered.
func (fs *FS) StartTrace() {
	fs.traceMu.Lock()
	defer fs.traceMu.Unlock()
	fs.tracing, fs.trace = true, nil
}

// Trace returns the requests answered since StartTrace, in the order they
// were answered.
func (fs *FS) Trace() []Request {
	fs.traceMu.Lock()
	defer fs.traceMu.Unlock()
	return append([]Request(nil), fs.trace...)
}

func (fs *FS) record(r *Request) {
	fs.traceMu.Lock()
	defer fs.traceMu.Unlock()
	if fs.tracing {
		r.Done = monoNanos()
		fs.trace = append(fs.trace, *r)
	}
}

func monoNanos() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

type node struct {
	id   uint64
	name string
	ino  uint64
	f    *os.File
}

// maxWrite is the largest WRITE (and READ) the kernel sends in one request:
// a whole 1 MiB lockspace read is one request.
const maxWrite = 1 << 20

// Options are the choices of a mount that cannot change once mounted.
type Options struct {
	// SyncDIO leaves ASYNC_DIO out of the connection's capabilities: an
	// io_submit of an O_DIRECT request on the mount then does not return
	// until the server has answered it, as on a kernel or FUSE server
	// without asynchronous direct I/O. A held request (Hang) then holds
	// the submitting thread in the kernel, and the caller's own timeout
	// on the request (io_getevents) never runs.
	SyncDIO bool
}

// Mount mounts a view of backingDir at mountDir (created if missing) and
// starts serving it. The first request is answered before Mount returns.
func Mount(backingDir, mountDir string) (*FS, error) {
	return MountWith(backingDir, mountDir, Options{})
}

// MountWith is Mount with options.
func MountWith(backingDir, mountDir string, o Options) (*FS, error) {
	backingDir, err := filepath.Abs(backingDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(mountDir, 0o755); err != nil {
		return nil, err
	}
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("fusefault: open /dev/fuse: %w", err)
	}
	fs := &FS{
		Dir:       mountDir,
		backing:   backingDir,
		opts:      o,
		dev:       fd,
		readerEnd: make(chan struct{}),
		changed:   make(chan struct{}),
		nodes:     map[string]*node{},
		byID:      map[uint64]*node{},
		nextID:    rootID + 1,
		initDone:  make(chan struct{}),
	}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other,default_permissions", fd)
	if err := unix.Mount("fusefault", mountDir, "fuse", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("fusefault: mount %s: %w", mountDir, err)
	}
	go fs.serve()
	// A stat of the mount point makes the kernel finish INIT first.
	if _, err := os.Stat(mountDir); err != nil {
		fs.Close()
		return nil, fmt.Errorf("fusefault: stat %s: %w", mountDir, err)
	}
	select {
	case <-fs.initDone:
	case <-time.After(10 * time.Second):
		fs.Close()
		return nil, errors.New("fusefault: no INIT from the kernel")
	}
	return fs, nil
}

// SetFault switches the mount's behaviour. Requests held by a previous Hang
// are re-examined under the new fault.
func (fs *FS) SetFault(f Fault) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.fault = f
	close(fs.changed)
	fs.changed = make(chan struct{})
}

// Fault returns the current fault.
func (fs *FS) Fault() Fault {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.fault
}

// Stats returns the request counters.
func (fs *FS) Stats() Stats {
	return Stats{
		Reads: fs.reads.Load(), Writes: fs.writes.Load(), Fsyncs: fs.fsyncs.Load(),
		Errors: fs.errs.Load(), Hung: fs.hung.Load(), Delayed: fs.delayed.Load(),
		BytesRead: fs.bytesRead.Load(), BytesWrote: fs.bytesWrote.Load(),
	}
}

// Path returns the path of file name as seen through this mount.
func (fs *FS) Path(name string) string { return filepath.Join(fs.Dir, name) }

// Close fails held requests, unmounts (lazily if files are still open:
// processes that still use the mount then get ENOTCONN) and stops the
// server. It is safe to call more than once.
func (fs *FS) Close() error {
	fs.mu.Lock()
	if fs.closing {
		fs.mu.Unlock()
		return nil
	}
	fs.closing = true
	close(fs.changed)
	fs.changed = make(chan struct{})
	fs.mu.Unlock()

	err := unix.Unmount(fs.Dir, 0)
	if err != nil {
		err = unix.Unmount(fs.Dir, unix.MNT_DETACH)
	}
	fs.stopRead.Store(true)
	<-fs.readerEnd
	// Closing the device aborts the connection: pending and later requests
	// of the (possibly lazily detached) mount fail with ENOTCONN.
	fs.devMu.Lock()
	unix.Close(fs.dev)
	fs.dev = -1
	fs.devMu.Unlock()
	fs.wg.Wait()
	fs.mu.Lock()
	for _, n := range fs.nodes {
		if n.f != nil {
			n.f.Close()
		}
	}
	fs.mu.Unlock()
	if err != nil {
		return fmt.Errorf("fusefault: unmount %s: %w", fs.Dir, err)
	}
	return nil
}

// serve reads requests and runs each in its own goroutine, until Close
// or the end of the connection. It polls with a short timeout so that Close
// can stop it (a read blocked on /dev/fuse is not woken by close(2)).
func (fs *FS) serve() {
	defer close(fs.readerEnd)
	buf := make([]byte, maxWrite+64*1024)
	pfd := []unix.PollFd{{Fd: int32(fs.dev), Events: unix.POLLIN}}
	for !fs.stopRead.Load() {
		n, err := unix.Read(fs.dev, buf)
		if err != nil {
			switch err {
			case syscall.EAGAIN:
				unix.Poll(pfd, 100)
				continue
			case syscall.ENOENT, syscall.EINTR:
				continue // the request was interrupted before we read it
			}
			return // ENODEV: unmounted and aborted
		}
		if n < inHeaderSize {
			continue
		}
		req := make([]byte, n)
		copy(req, buf[:n])
		fs.wg.Add(1)
		go func() {
			defer fs.wg.Done()
			fs.handle(req)
		}()
	}
}

// reply writes a reply with the given error (0 or a positive errno) and
// payload parts.
func (fs *FS) reply(unique uint64, errno syscall.Errno, parts ...[]byte) {
	n := outHeaderSize
	for _, p := range parts {
		n += len(p)
	}
	b := make([]byte, outHeaderSize, n)
	le.PutUint32(b[0:], uint32(n))
	le.PutUint32(b[4:], uint32(-int32(errno)))
	le.PutUint64(b[8:], unique)
	for _, p := range parts {
		b = append(b, p...)
	}
	// Errors (ENOENT: the request was interrupted or the connection
	// aborted) need no handling: the kernel has forgotten the request.
	fs.devMu.RLock()
	defer fs.devMu.RUnlock()
	if fs.dev >= 0 {
		unix.Write(fs.dev, b)
	}
}

func (fs *FS) handle(req []byte) {
	h := decodeInHeader(req)
	body := req[inHeaderSize:]
	switch h.Opcode {
	case opInit:
		fs.doInit(h, body)
	case opForget, opBatchForget, opInterrupt:
		// no reply
	case opLookup:
		fs.doLookup(h, body)
	case opGetattr:
		fs.doGetattr(h)
	case opOpen:
		out := make([]byte, openOutSize)
		le.PutUint32(out[8:], fopenDirectIO|fopenParallelDirectWrites)
		if fs.lookupID(h.NodeID) == nil {
			fs.reply(h.Unique, syscall.ENOENT)
			return
		}
		fs.reply(h.Unique, 0, out)
	case opOpendir:
		fs.reply(h.Unique, 0, make([]byte, openOutSize))
	case opRead:
		fs.doRead(h, body)
	case opWrite:
		fs.doWrite(h, body)
	case opFsync:
		fs.doFsync(h)
	case opReaddir:
		fs.doReaddir(h, body)
	case opStatfs:
		fs.doStatfs(h)
	case opFlush, opRelease, opReleasedir, opFsyncdir, opAccess, opDestroy:
		fs.reply(h.Unique, 0)
	case opSetattr:
		fs.reply(h.Unique, syscall.EPERM)
	default:
		fs.reply(h.Unique, syscall.ENOSYS)
	}
}

// gate applies the current fault to one request. It returns 0 when the
// request may proceed, or the errno to fail it with; held reports whether a
// Hang fault held it.
func (fs *FS) gate(op Ops, name string) (errno syscall.Errno, held bool) {
	counted := false
	for {
		fs.mu.Lock()
		f, changed, closing := fs.fault, fs.changed, fs.closing
		fs.mu.Unlock()
		if closing {
			return syscall.EIO, counted
		}
		if !f.applies(op, name) {
			return 0, counted
		}
		switch f.Mode {
		case Error:
			fs.errs.Add(1)
			return f.errno(), counted
		case Delay:
			fs.delayed.Add(1)
			select {
			case <-time.After(f.Delay):
				return 0, counted
			case <-changed:
				continue
			}
		case Hang:
			if !counted {
				fs.hung.Add(1)
				counted = true
			}
			<-changed
		default:
			return 0, counted
		}
	}
}

func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.EIO
}
