package daemon

import (
	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/internal/process"
)

// File names inside the run directory (docs/cli.md "Startup").
const (
	PidFileName = "sanlock.pid"
	SockName    = "sanlock.sock"
)

// ErrLocked is returned (wrapped) by Start when another daemon holds the
// lock file of the run directory (process.ErrLocked).
var ErrLocked = process.ErrLocked

// Nodename returns uname's nodename (process.Nodename).
func Nodename() string { return process.Nodename() }

// raiseNofile is descriptor rule 1 (package internal/process): the soft
// RLIMIT_NOFILE raised to the hard one.
func raiseNofile() uint64 { return process.RaiseNofile() }

// newFDGuard takes the reserve descriptor of rule 3.
func newFDGuard() *process.FDGuard { return process.NewFDGuard() }

// guardOpen wraps a disk open with descriptor rule 2 (refused with EMFILE
// when fewer than process.FDReserve descriptors would be left) and its
// error line.
func (s *Server) guardOpen(open func(string) (diskfmt.Device, error)) func(string) (diskfmt.Device, error) {
	return process.GuardOpen(open, func(path string) {
		if s.fds == nil || s.fds.ShouldLog() {
			s.lg.Error("open: too many open files", zap.String("path", path),
				zap.Int("left_for_connections", process.FDReserve), zap.String("hint", process.LimitHint()))
		}
	})
}

// acceptExhausted is descriptor rule 3 after an accept failed with EMFILE
// or ENFILE: the waiting connection is accepted on the reserve descriptor
// and closed at once. It reports whether a connection was taken off the
// queue (so the loop can go on at once).
func (s *Server) acceptExhausted() bool {
	took, n := s.fds.AcceptExhausted(func() bool {
		uc, err := s.ln.Accept()
		if err != nil {
			return false
		}
		_ = uc.Close()
		return true
	})
	if s.fds.ShouldLog() {
		s.lg.Error("accept: too many open files; connection closed", zap.Uint64("refused", n),
			zap.String("hint", process.LimitHint()))
	}
	return took
}
