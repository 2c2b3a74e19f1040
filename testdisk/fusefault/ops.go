package fusefault

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"syscall"

	"golang.org/x/sys/unix"
)

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
	want := uint32(capAsyncRead | capBigWrites | capAsyncDIO | capParallelDO | capMaxPages)
	if fs.opts.SyncDIO {
		want &^= capAsyncDIO
	}
	le.PutUint32(out[12:], flags&want)
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
	r := Request{Op: "read", File: n.name, Off: off, Size: size, PID: h.PID, Arrived: monoNanos()}
	defer fs.record(&r)
	if r.Errno, r.Held = fs.gate(Reads, n.name); r.Errno != 0 {
		fs.reply(h.Unique, r.Errno)
		return
	}
	buf := make([]byte, size)
	got, err := n.f.ReadAt(buf, int64(off))
	if err != nil && !errors.Is(err, io.EOF) {
		r.Errno = errnoOf(err)
		fs.reply(h.Unique, r.Errno)
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
	r := Request{Op: "write", File: n.name, Off: off, Size: size, PID: h.PID, Arrived: monoNanos(),
		Head: append([]byte(nil), data[:min(size, 512)]...)}
	defer fs.record(&r)
	if r.Errno, r.Held = fs.gate(Writes, n.name); r.Errno != 0 {
		fs.reply(h.Unique, r.Errno)
		return
	}
	if _, err := n.f.WriteAt(data[:size], int64(off)); err != nil {
		r.Errno = errnoOf(err)
		fs.reply(h.Unique, r.Errno)
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
	r := Request{Op: "fsync", File: n.name, PID: h.PID, Arrived: monoNanos()}
	defer fs.record(&r)
	if r.Errno, r.Held = fs.gate(Writes, n.name); r.Errno != 0 {
		fs.reply(h.Unique, r.Errno)
		return
	}
	fs.fsyncs.Add(1)
	if err := unix.Fdatasync(int(n.f.Fd())); err != nil {
		r.Errno = errnoOf(err)
		fs.reply(h.Unique, r.Errno)
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
