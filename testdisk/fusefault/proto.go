package fusefault

import "encoding/binary"

// The subset of the Linux FUSE kernel protocol (include/uapi/linux/fuse.h)
// this server speaks. All integers are in host byte order (little-endian
// on every platform we run on).

const (
	protoMajor = 7
	// protoMinor is the protocol minor we answer with: 36 has every struct
	// size used here and the FOPEN_PARALLEL_DIRECT_WRITES open flag.
	protoMinor = 36

	rootID = 1

	inHeaderSize  = 40
	outHeaderSize = 16
	attrSize      = 88
	entryOutSize  = 40 + attrSize
	attrOutSize   = 16 + attrSize
	openOutSize   = 16
	writeInSize   = 40
	readInSize    = 40
	initOutSize   = 64
	statfsOutSize = 80
)

// Opcodes.
const (
	opLookup      = 1
	opForget      = 2
	opGetattr     = 3
	opSetattr     = 4
	opOpen        = 14
	opRead        = 15
	opWrite       = 16
	opStatfs      = 17
	opRelease     = 18
	opFsync       = 20
	opFlush       = 25
	opInit        = 26
	opOpendir     = 27
	opReaddir     = 28
	opReleasedir  = 29
	opFsyncdir    = 30
	opAccess      = 34
	opInterrupt   = 36
	opDestroy     = 38
	opBatchForget = 42
)

// Init capability flags (fuse_init_in/out.flags).
const (
	capAsyncRead  = 1 << 0
	capBigWrites  = 1 << 5
	capAsyncDIO   = 1 << 15
	capParallelDO = 1 << 18
	capMaxPages   = 1 << 22
)

// Open reply flags (fuse_open_out.open_flags).
const (
	fopenDirectIO             = 1 << 0
	fopenParallelDirectWrites = 1 << 6
)

var le = binary.LittleEndian

// inHeader is fuse_in_header.
type inHeader struct {
	Len    uint32
	Opcode uint32
	Unique uint64
	NodeID uint64
	UID    uint32
	GID    uint32
	PID    uint32
}

func decodeInHeader(b []byte) inHeader {
	return inHeader{
		Len:    le.Uint32(b[0:]),
		Opcode: le.Uint32(b[4:]),
		Unique: le.Uint64(b[8:]),
		NodeID: le.Uint64(b[16:]),
		UID:    le.Uint32(b[24:]),
		GID:    le.Uint32(b[28:]),
		PID:    le.Uint32(b[32:]),
	}
}

// attr is fuse_attr.
type attr struct {
	Ino     uint64
	Size    uint64
	Blocks  uint64
	Mtime   uint64
	Mode    uint32
	Nlink   uint32
	Blksize uint32
}

func (a attr) put(b []byte) {
	le.PutUint64(b[0:], a.Ino)
	le.PutUint64(b[8:], a.Size)
	le.PutUint64(b[16:], a.Blocks)
	le.PutUint64(b[24:], a.Mtime) // atime
	le.PutUint64(b[32:], a.Mtime) // mtime
	le.PutUint64(b[40:], a.Mtime) // ctime
	// 48..59: nsec fields, zero
	le.PutUint32(b[60:], a.Mode)
	le.PutUint32(b[64:], a.Nlink)
	// 68 uid, 72 gid, 76 rdev: zero (root)
	le.PutUint32(b[80:], a.Blksize)
	// 84 flags: zero
}
