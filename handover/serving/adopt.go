package serving

import (
	"fmt"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/handover"
	"github.com/gosanlock/gosanlock/wire"
)

// AdoptListener wraps the handed-over listening socket f (closed here)
// and returns it with its fd. Closing it never unlinks the socket path,
// which the old image created.
func AdoptListener(f *os.File) (*net.UnixListener, int, error) {
	ln, err := net.FileListener(f)
	_ = f.Close()
	if err != nil {
		return nil, -1, fmt.Errorf("listener: %w", err)
	}
	uln, ok := ln.(*net.UnixListener)
	if !ok {
		ln.Close()
		return nil, -1, fmt.Errorf("listener is a %T", ln)
	}
	uln.SetUnlinkOnClose(false)
	return uln, rawFD(uln, false), nil
}

// AdoptConn wraps a handed-over connection f (closed here) and returns it
// with its fd; passcred sets SO_PASSCRED as on an accepted client.
func AdoptConn(f *os.File, passcred bool) (*net.UnixConn, int, error) {
	nc, err := net.FileConn(f)
	_ = f.Close()
	if err != nil {
		return nil, -1, err
	}
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		nc.Close()
		return nil, -1, fmt.Errorf("not a unix socket but a %T", nc)
	}
	return uc, rawFD(uc, passcred), nil
}

func rawFD(c interface {
	SyscallConn() (syscall.RawConn, error)
}, passcred bool) int {
	fd := -1
	if rc, err := c.SyscallConn(); err == nil {
		_ = rc.Control(func(u uintptr) {
			fd = int(u)
			if passcred {
				_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PASSCRED, 1)
			}
		})
	}
	return fd
}

// PeerMayReexec reports whether the peer of uc may ask for a reexec: root
// or this daemon's uid. A peer whose credentials cannot be read may not.
func PeerMayReexec(uc *net.UnixConn) bool {
	f, err := DupSocket(uc)
	if err != nil {
		return false
	}
	defer f.Close()
	_, uid, _, err := handover.PeerCred(f)
	return err == nil && (uid == 0 || int(uid) == os.Getuid())
}

// Reply is the answer to the reexec command q: the header with result rv
// and, when why is set, one daemon record carrying it.
func Reply(q *wire.Request, rv int32, why string) ([]byte, error) {
	h := q.Header
	h.Version, h.Length, h.Data, h.Data2 = wire.ProtoVersion, wire.HeaderSize, uint32(rv), 0
	b := h.Bytes()
	if why == "" {
		return b, nil
	}
	rec := wire.StateRecord{State: wire.State{Type: wire.StateDaemon}, Text: why}
	return rec.AppendBinary(b)
}
