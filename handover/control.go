package handover

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The control channel is a SOCK_SEQPACKET socketpair between the old and
// the new image. Every message is one packet: an 8-byte header (type,
// body length, little endian) and the body; fds travel as SCM_RIGHTS on
// the packet they belong to (docs/upgrade.md "Protocol").
const (
	// ProtocolVersion is the control protocol this binary speaks. Like
	// the header of the state blob, the message header is frozen.
	ProtocolVersion uint32 = 1

	msgReady    uint32 = 1 // new -> old: state read and valid; body: proto, min fmt, max fmt, sha256 of the blob
	msgError    uint32 = 2 // new -> old: why the new image gives up; body: text
	msgFDs      uint32 = 3 // old -> new: a batch of fds (SCM_RIGHTS); body: count
	msgCommit   uint32 = 4 // old -> new: quiesced; the final state memfd (SCM_RIGHTS); body: new fd count, sha256
	msgTookOver uint32 = 5 // new -> old: final state adopted; not acting yet
	msgGo       uint32 = 6 // old -> new: the old image stops for good; act
	msgAbort    uint32 = 7 // old -> new: handover cancelled before commit; body: text

	msgHeaderSize = 8
	maxMsgBody    = 4096
	maxFDsPerMsg  = 200 // below the kernel's SCM_MAX_FD (253)

	// EnvVar names the inherited fds in the new image's environment.
	EnvVar = "GOSANLOCK_HANDOVER"
)

type message struct {
	typ  uint32
	body []byte
	fds  []int
}

func msgName(t uint32) string {
	switch t {
	case msgReady:
		return "READY"
	case msgError:
		return "ERROR"
	case msgFDs:
		return "FDS"
	case msgCommit:
		return "COMMIT"
	case msgTookOver:
		return "TOOK_OVER"
	case msgGo:
		return "GO"
	case msgAbort:
		return "ABORT"
	}
	return "type " + strconv.FormatUint(uint64(t), 10)
}

// errGarbage marks a malformed control message.
var errGarbage = errors.New("malformed control message")

// ctlConn is one end of the control socketpair.
type ctlConn struct{ c *net.UnixConn }

func newCtlConn(f *os.File) (*ctlConn, error) {
	nc, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		nc.Close()
		return nil, fmt.Errorf("control socket: %T, not a unix socket", nc)
	}
	return &ctlConn{c: uc}, nil
}

func (c *ctlConn) Close() error { return c.c.Close() }

func (c *ctlConn) send(typ uint32, body []byte, fds []int) error {
	b := make([]byte, msgHeaderSize+len(body))
	binary.LittleEndian.PutUint32(b, typ)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(body)))
	copy(b[msgHeaderSize:], body)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	_ = c.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, _, err := c.c.WriteMsgUnix(b, oob, nil); err != nil {
		return fmt.Errorf("send %s: %w", msgName(typ), err)
	}
	return nil
}

// recv reads one message. A deadline of zero waits without limit; the
// context's end also ends the wait, with the context's error. errEOF
// means the peer closed its end. Received fds are close-on-exec.
func (c *ctlConn) recv(ctx context.Context, deadline time.Time) (*message, error) {
	// The deadline is set before the AfterFunc is registered, so a
	// context that is already done cannot be overridden by it.
	_ = c.c.SetReadDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = c.c.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	b := make([]byte, msgHeaderSize+maxMsgBody+1)
	oob := make([]byte, unix.CmsgSpace(4*maxFDsPerMsg))
	n, oobn, flags, _, err := c.c.ReadMsgUnix(b, oob)
	fds, perr := parseRights(oob[:oobn])
	if errors.Is(err, io.EOF) || errors.Is(err, unix.ECONNRESET) {
		// ECONNRESET: the peer closed with our last packet unread.
		err = errEOF
	}
	if err != nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		closeFDs(fds)
		return nil, err
	}
	if n == 0 && oobn == 0 {
		return nil, errEOF
	}
	bad := func(format string, args ...any) (*message, error) {
		closeFDs(fds)
		return nil, fmt.Errorf("%w: %s", errGarbage, fmt.Sprintf(format, args...))
	}
	switch {
	case perr != nil:
		return bad("%v", perr)
	case flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0:
		return bad("truncated (%d bytes, flags %#x)", n, flags)
	case n < msgHeaderSize:
		return bad("%d bytes, shorter than the header", n)
	}
	m := &message{typ: binary.LittleEndian.Uint32(b), fds: fds}
	if l := binary.LittleEndian.Uint32(b[4:]); int(l) != n-msgHeaderSize {
		return bad("%s says %d body bytes, has %d", msgName(m.typ), l, n-msgHeaderSize)
	}
	m.body = b[msgHeaderSize:n]
	return m, nil
}

var errEOF = errors.New("control channel closed")

func parseRights(oob []byte) ([]int, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	scms, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	var bad error
	for i := range scms {
		r, err := unix.ParseUnixRights(&scms[i])
		if err != nil {
			bad = err
			continue
		}
		fds = append(fds, r...)
	}
	if bad != nil {
		closeFDs(fds)
		return nil, bad
	}
	return fds, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// readyBody is READY's body.
type readyBody struct {
	proto, minFmt, maxFmt uint32
	digest                [32]byte
}

func (r readyBody) encode() []byte {
	b := make([]byte, 12+32)
	binary.LittleEndian.PutUint32(b, r.proto)
	binary.LittleEndian.PutUint32(b[4:], r.minFmt)
	binary.LittleEndian.PutUint32(b[8:], r.maxFmt)
	copy(b[12:], r.digest[:])
	return b
}

func decodeReady(b []byte) (readyBody, error) {
	var r readyBody
	if len(b) != 44 {
		return r, fmt.Errorf("%w: READY body of %d bytes (want 44)", errGarbage, len(b))
	}
	r.proto = binary.LittleEndian.Uint32(b)
	r.minFmt = binary.LittleEndian.Uint32(b[4:])
	r.maxFmt = binary.LittleEndian.Uint32(b[8:])
	copy(r.digest[:], b[12:])
	return r, nil
}

func commitBody(newFDs int, digest [32]byte) []byte {
	b := make([]byte, 4+32)
	binary.LittleEndian.PutUint32(b, uint32(newFDs))
	copy(b[4:], digest[:])
	return b
}

func countBody(n int) []byte {
	b := make([]byte, 4)
	binary.LittleEndian.PutUint32(b, uint32(n))
	return b
}

// printable returns text from a peer, cut and with control bytes escaped.
func printable(b []byte) string {
	if len(b) > 512 {
		b = b[:512]
	}
	s := strconv.Quote(string(b))
	return s[1 : len(s)-1]
}

// env is the parsed EnvVar: "v1 ctl=N state=N fds=N:M" (fds: first fd
// number and count of the inherited fd table).
type env struct {
	ctl, state, fd0, nfd int
}

func (e env) String() string {
	return fmt.Sprintf("v%d ctl=%d state=%d fds=%d:%d", ProtocolVersion, e.ctl, e.state, e.fd0, e.nfd)
}

func parseEnv(s string) (env, error) {
	var e env
	f := strings.Fields(s)
	if len(f) != 4 {
		return e, fmt.Errorf("%s=%q: want 4 fields", EnvVar, s)
	}
	if f[0] != fmt.Sprintf("v%d", ProtocolVersion) {
		return e, fmt.Errorf("%s=%q: control protocol %s, this binary speaks v%d", EnvVar, s, f[0], ProtocolVersion)
	}
	num := func(kv, key string) (int, error) {
		v, ok := strings.CutPrefix(kv, key+"=")
		if !ok {
			return 0, fmt.Errorf("%s=%q: want %s=", EnvVar, s, key)
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 1<<20 {
			return 0, fmt.Errorf("%s=%q: bad %s", EnvVar, s, key)
		}
		return n, nil
	}
	var err error
	if e.ctl, err = num(f[1], "ctl"); err != nil {
		return e, err
	}
	if e.state, err = num(f[2], "state"); err != nil {
		return e, err
	}
	v, ok := strings.CutPrefix(f[3], "fds=")
	a, b, ok2 := strings.Cut(v, ":")
	if !ok || !ok2 {
		return e, fmt.Errorf("%s=%q: want fds=FIRST:COUNT", EnvVar, s)
	}
	if e.fd0, err = num("x="+a, "x"); err != nil {
		return e, err
	}
	if e.nfd, err = num("x="+b, "x"); err != nil || e.nfd > MaxFDs {
		return e, fmt.Errorf("%s=%q: bad fd count", EnvVar, s)
	}
	return e, nil
}

// memfdBlob returns a sealed memfd holding b.
func memfdBlob(b []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate("gosanlock-handover", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "gosanlock-handover")
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, fmt.Errorf("write state memfd: %w", err)
	}
	seals := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE | unix.F_SEAL_SEAL
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, seals); err != nil {
		f.Close()
		return nil, fmt.Errorf("seal state memfd: %w", err)
	}
	return f, nil
}

// readBlob reads a whole state blob from fd (a memfd), bounded by
// MaxStateSize, and returns it with its SHA-256.
func readBlob(fd int) ([]byte, [32]byte, error) {
	var st unix.Stat_t
	var sum [32]byte
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, sum, fmt.Errorf("state fd %d: %w", fd, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, sum, fmt.Errorf("state fd %d: not a memfd (mode %#o)", fd, st.Mode)
	}
	if st.Size < 0 || st.Size > MaxStateSize {
		return nil, sum, fmt.Errorf("%w: %d bytes (limit %d)", ErrTooLarge, st.Size, MaxStateSize)
	}
	b := make([]byte, st.Size)
	for off := 0; off < len(b); {
		n, err := unix.Pread(fd, b[off:], int64(off))
		if err != nil {
			return nil, sum, fmt.Errorf("read state fd %d: %w", fd, err)
		}
		if n == 0 {
			return nil, sum, fmt.Errorf("read state fd %d: short (%d of %d bytes)", fd, off, len(b))
		}
		off += n
	}
	return b, sha256.Sum256(b), nil
}

type fileID struct{ dev, ino uint64 }

func identify(fd int) (fileID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fileID{}, err
	}
	return fileID{uint64(st.Dev), st.Ino}, nil
}
