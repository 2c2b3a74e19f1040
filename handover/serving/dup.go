package serving

import (
	"fmt"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// DupSocket returns a close-on-exec duplicate of a unix socket's fd as a
// file, without touching the socket's blocking mode (no Fd call).
func DupSocket(c any) (*os.File, error) {
	var rc syscall.RawConn
	var err error
	switch v := c.(type) {
	case *net.UnixListener:
		rc, err = v.SyscallConn()
	case *net.UnixConn:
		rc, err = v.SyscallConn()
	default:
		return nil, fmt.Errorf("%T is not a unix socket", c)
	}
	if err != nil {
		return nil, err
	}
	return dupRC(rc, "handover")
}

// DupFile returns a close-on-exec duplicate of f.
func DupFile(f *os.File) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	return dupRC(rc, f.Name())
}

func dupRC(rc syscall.RawConn, name string) (*os.File, error) {
	nfd := -1
	var err error
	if cerr := rc.Control(func(fd uintptr) { nfd, err = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(nfd), name), nil
}

// CloseAll closes every non-nil file of fs.
func CloseAll(fs []*os.File) {
	for _, f := range fs {
		if f != nil {
			_ = f.Close()
		}
	}
}
