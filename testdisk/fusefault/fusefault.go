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
	"io"
	"os"
	"path/filepath"
	"sort"
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

// Mount mounts a view of backingDir at mountDir (created if missing) and
// starts serving it. The first request is answered before Mount returns.
func Mount(backingDir, mountDir string) (*FS, error) {
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

func (fs *FS) doInit(h inHeader, body []byte) {
	if len(body) < 16 {
		fs.reply(h.Unique, syscall.EINVAL)
		return
	}
	major, minor := le.Uint32(body[0:]), le.Uint32(body[4:])
	readahead, flags := le.Uint32(body[8:]), le.Uint32(body[12:])
	if major != protoMajor {
		fs.reply(h.Unique, syscall.EPROTO)
		return
	}
	if minor > protoMinor {
		minor = protoMinor
	}
	out := make([]byte, initOutSize)
	le.PutUint32(out[0:], protoMajor)
	le.PutUint32(out[4:], minor)
	le.PutUint32(out[8:], readahead)
	le.PutUint32(out[12:], flags&(capAsyncRead|capBigWrites|capAsyncDIO|capParallelDO|capMaxPages))
	le.PutUint16(out[16:], 64) // max_background
	le.PutUint16(out[18:], 48) // congestion_threshold
	le.PutUint32(out[20:], maxWrite)
	le.PutUint32(out[24:], 1) // time_gran
	le.PutUint16(out[28:], maxWrite/4096)
	fs.reply(h.Unique, 0, out)
	fs.initOnce.Do(func() { close(fs.initDone) })
}

// lookupID returns the node for a file id, or nil.
func (fs *FS) lookupID(id uint64) *node {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.byID[id]
}

// statNode looks a backing file up by name and returns its node (with an
// open backing file) and attributes.
func (fs *FS) statNode(name string) (*node, attr, syscall.Errno) {
	if name == "" || name == "." || name == ".." || filepath.Base(name) != name {
		return nil, attr{}, syscall.ENOENT
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(fs.backing, name), &st); err != nil {
		return nil, attr{}, errnoOf(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, attr{}, syscall.ENOENT
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.nodes[name]
	if n == nil {
		n = &node{id: fs.nextID, name: name}
		fs.nextID++
		fs.nodes[name] = n
		fs.byID[n.id] = n
	}
	if n.f == nil || n.ino != st.Ino {
		f, err := os.OpenFile(filepath.Join(fs.backing, name), os.O_RDWR, 0)
		if err != nil {
			return nil, attr{}, errnoOf(err)
		}
		if n.f != nil {
			n.f.Close()
		}
		n.f, n.ino = f, st.Ino
	}
	return n, fileAttr(n.id, &st), 0
}

func fileAttr(id uint64, st *unix.Stat_t) attr {
	return attr{
		Ino: id, Size: uint64(st.Size), Blocks: uint64(st.Blocks),
		Mtime: uint64(st.Mtim.Sec), Mode: unix.S_IFREG | 0o600, Nlink: 1, Blksize: 4096,
	}
}

func rootAttr() attr {
	return attr{Ino: rootID, Mode: unix.S_IFDIR | 0o755, Nlink: 2, Blksize: 4096}
}

func (fs *FS) doLookup(h inHeader, body []byte) {
	if h.NodeID != rootID {
		fs.reply(h.Unique, syscall.ENOENT)
		return
	}
	name := cString(body)
	n, a, errno := fs.statNode(name)
	if errno != 0 {
		fs.reply(h.Unique, errno)
		return
	}
	out := make([]byte, entryOutSize)
	le.PutUint64(out[0:], n.id)
	le.PutUint64(out[16:], 1) // entry_valid seconds
	le.PutUint64(out[24:], 1) // attr_valid seconds
	a.put(out[40:])
	fs.reply(h.Unique, 0, out)
}

func (fs *FS) doGetattr(h inHeader) {
	a := rootAttr()
	if h.NodeID != rootID {
		n := fs.lookupID(h.NodeID)
		if n == nil {
			fs.reply(h.Unique, syscall.ENOENT)
			return
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(n.f.Fd()), &st); err != nil {
			fs.reply(h.Unique, errnoOf(err))
			return
		}
		a = fileAttr(n.id, &st)
	}
	out := make([]byte, attrOutSize)
	le.PutUint64(out[0:], 1) // attr_valid seconds
	a.put(out[16:])
	fs.reply(h.Unique, 0, out)
}

// gate applies the current fault to one request. It returns 0 when the
// request may proceed, or the errno to fail it with.
func (fs *FS) gate(op Ops, name string) syscall.Errno {
	counted := false
	for {
		fs.mu.Lock()
		f, changed, closing := fs.fault, fs.changed, fs.closing
		fs.mu.Unlock()
		if closing {
			return syscall.EIO
		}
		if !f.applies(op, name) {
			return 0
		}
		switch f.Mode {
		case Error:
			fs.errs.Add(1)
			return f.errno()
		case Delay:
			fs.delayed.Add(1)
			select {
			case <-time.After(f.Delay):
				return 0
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
			return 0
		}
	}
}

func (fs *FS) doRead(h inHeader, body []byte) {
	n := fs.lookupID(h.NodeID)
	if n == nil || len(body) < readInSize {
		fs.reply(h.Unique, syscall.EBADF)
		return
	}
	off, size := le.Uint64(body[8:]), le.Uint32(body[16:])
	if size > maxWrite {
		size = maxWrite
	}
	if errno := fs.gate(Reads, n.name); errno != 0 {
		fs.reply(h.Unique, errno)
		return
	}
	buf := make([]byte, size)
	got, err := n.f.ReadAt(buf, int64(off))
	if err != nil && !errors.Is(err, io.EOF) {
		fs.reply(h.Unique, errnoOf(err))
		return
	}
	fs.reads.Add(1)
	fs.bytesRead.Add(int64(got))
	fs.reply(h.Unique, 0, buf[:got])
}

func (fs *FS) doWrite(h inHeader, body []byte) {
	n := fs.lookupID(h.NodeID)
	if n == nil || len(body) < writeInSize {
		fs.reply(h.Unique, syscall.EBADF)
		return
	}
	off, size := le.Uint64(body[8:]), le.Uint32(body[16:])
	data := body[writeInSize:]
	if uint32(len(data)) < size {
		fs.reply(h.Unique, syscall.EINVAL)
		return
	}
	if errno := fs.gate(Writes, n.name); errno != 0 {
		fs.reply(h.Unique, errno)
		return
	}
	if _, err := n.f.WriteAt(data[:size], int64(off)); err != nil {
		fs.reply(h.Unique, errnoOf(err))
		return
	}
	fs.writes.Add(1)
	fs.bytesWrote.Add(int64(size))
	out := make([]byte, 8)
	le.PutUint32(out[0:], size)
	fs.reply(h.Unique, 0, out)
}

func (fs *FS) doFsync(h inHeader) {
	n := fs.lookupID(h.NodeID)
	if n == nil {
		fs.reply(h.Unique, syscall.EBADF)
		return
	}
	if errno := fs.gate(Writes, n.name); errno != 0 {
		fs.reply(h.Unique, errno)
		return
	}
	fs.fsyncs.Add(1)
	if err := unix.Fdatasync(int(n.f.Fd())); err != nil {
		fs.reply(h.Unique, errnoOf(err))
		return
	}
	fs.reply(h.Unique, 0)
}

// doReaddir lists the regular files of the backing directory; the offset
// of an entry is its index + 1.
func (fs *FS) doReaddir(h inHeader, body []byte) {
	if len(body) < readInSize {
		fs.reply(h.Unique, syscall.EINVAL)
		return
	}
	off, size := le.Uint64(body[8:]), le.Uint32(body[16:])
	ents, err := os.ReadDir(fs.backing)
	if err != nil {
		fs.reply(h.Unique, errnoOf(err))
		return
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var out []byte
	for i := int(off); i < len(names); i++ {
		name := names[i]
		rec := (24 + len(name) + 7) &^ 7
		if len(out)+rec > int(size) {
			break
		}
		e := make([]byte, rec)
		le.PutUint64(e[0:], uint64(1000+i)) // inode numbers are not used
		le.PutUint64(e[8:], uint64(i+1))
		le.PutUint32(e[16:], uint32(len(name)))
		le.PutUint32(e[20:], unix.DT_REG)
		copy(e[24:], name)
		out = append(out, e...)
	}
	fs.reply(h.Unique, 0, out)
}

func (fs *FS) doStatfs(h inHeader) {
	var st unix.Statfs_t
	if err := unix.Statfs(fs.backing, &st); err != nil {
		fs.reply(h.Unique, errnoOf(err))
		return
	}
	out := make([]byte, statfsOutSize)
	le.PutUint64(out[0:], st.Blocks)
	le.PutUint64(out[8:], st.Bfree)
	le.PutUint64(out[16:], st.Bavail)
	le.PutUint64(out[24:], st.Files)
	le.PutUint64(out[32:], st.Ffree)
	le.PutUint32(out[40:], uint32(st.Bsize))
	le.PutUint32(out[44:], 255)
	le.PutUint32(out[48:], uint32(st.Frsize))
	fs.reply(h.Unique, 0, out)
}

func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.EIO
}
