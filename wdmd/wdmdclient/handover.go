package wdmdclient

import (
	"errors"
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// Handover of a wdmd session (docs/upgrade.md "Adopting wdmd sessions"):
// the session's connection is handed to the new image as a duplicate fd, so wdmd never sees it close and the expiry it holds for
// the lockspace never lapses; the new process continues the same session.

// Handover returns a close-on-exec duplicate of the session's connection
// (made without (*os.File).Fd, which would make the socket blocking), its
// name and whether it is activated (refcount set).
func (s *Session) Handover() (f *os.File, name string, active bool, err error) {
	rc, err := s.Conn.c.SyscallConn()
	if err != nil {
		return nil, "", false, err
	}
	nfd := -1
	if cerr := rc.Control(func(fd uintptr) { nfd, err = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); cerr != nil {
		return nil, "", false, cerr
	}
	if err != nil {
		return nil, "", false, err
	}
	return os.NewFile(uintptr(nfd), "wdmd"), s.Name, s.refcount, nil
}

// AdoptSession continues a session handed over by Handover in another
// process: f is the connection (AdoptSession closes it, keeping its own
// duplicate). Nothing is sent to wdmd.
func AdoptSession(f *os.File, name string, active bool) (*Session, error) {
	nc, err := net.FileConn(f)
	_ = f.Close()
	if err != nil {
		return nil, fmt.Errorf("wdmd session %s: %w", name, err)
	}
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		nc.Close()
		return nil, errors.New("wdmd session " + name + ": not a unix socket")
	}
	return &Session{Conn: &Conn{c: uc}, Name: name, refcount: active}, nil
}
