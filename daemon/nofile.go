package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/diskfmt"
)

// Descriptors (docs/reliability.md). Lease disks and connections share the
// daemon's RLIMIT_NOFILE. Three rules keep one kind from starving the
// other:
//
//  1. At start the soft limit is raised to the hard limit (the limit a
//     unit sets with LimitNOFILE=).
//  2. A disk open (lockspace or resource) is refused with EMFILE when fewer
//     than fdReserve descriptors would be left, so connections (status,
//     release, other clients' acquires) always have descriptors. The
//     acquire that hit it fails with -24 and an error line names the limit
//     and how to raise it.
//  3. The listener never stalls on EMFILE/ENFILE: it closes a reserve
//     descriptor, accepts the waiting connection and closes it at once (the
//     client sees the connection closed, not a hang), then takes the
//     reserve again. Connections already open are not affected.

// fdReserve is how many descriptors disk opens leave for connections and
// the daemon's own use (log file, wdmd sockets, kill programs).
const fdReserve = 64

// fdLogEvery rate-limits the "out of descriptors" error lines.
const fdLogEvery = 10 * time.Second

// raiseNofile sets the soft RLIMIT_NOFILE to the hard one and returns the
// resulting soft limit (0 if it cannot be read).
func raiseNofile() uint64 {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	if rl.Cur < rl.Max {
		want := rl
		want.Cur = rl.Max
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &want); err == nil {
			rl = want
		}
	}
	return rl.Cur
}

// nofileLimit returns the current soft RLIMIT_NOFILE (0 if unknown).
func nofileLimit() uint64 {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return rl.Cur
}

// fdGuard implements rules 2 and 3 for one server.
type fdGuard struct {
	mu      sync.Mutex
	reserve int // a /dev/null descriptor held for rule 3, or -1
	lastLog time.Time
	refused uint64 // connections closed at accept for lack of descriptors
}

func newFDGuard() *fdGuard {
	g := &fdGuard{reserve: -1}
	g.takeReserve()
	return g
}

func (g *fdGuard) takeReserve() {
	if g.reserve >= 0 {
		return
	}
	if fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
		g.reserve = fd
	}
}

func (g *fdGuard) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.reserve >= 0 {
		_ = unix.Close(g.reserve)
		g.reserve = -1
	}
}

// isFDExhausted reports EMFILE or ENFILE.
func isFDExhausted(err error) bool {
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE)
}

// headroom reports whether a disk open may take a descriptor: the lowest
// free descriptor number (probed with an open of /dev/null) must stay
// below limit-fdReserve.
func headroom() error {
	fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	_ = unix.Close(fd)
	if lim := nofileLimit(); lim > fdReserve && uint64(fd) >= lim-fdReserve {
		return unix.EMFILE
	}
	return nil
}

// shouldLog rate-limits the error lines.
func (g *fdGuard) shouldLog() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now := time.Now(); now.Sub(g.lastLog) >= fdLogEvery {
		g.lastLog = now
		return true
	}
	return false
}

// limitHint is the advice every "out of descriptors" line ends with.
func limitHint() string {
	return fmt.Sprintf("the daemon's descriptor limit RLIMIT_NOFILE is %d; raise it with LimitNOFILE= in the "+
		"sanlock unit (systemctl edit sanlock) or ulimit -n before starting the daemon", nofileLimit())
}

// guardOpen wraps a disk open with rule 2 and the error line.
func (s *Server) guardOpen(open func(string) (diskfmt.Device, error)) func(string) (diskfmt.Device, error) {
	return func(path string) (diskfmt.Device, error) {
		err := headroom()
		if err == nil {
			var dev diskfmt.Device
			if dev, err = open(path); err == nil || !isFDExhausted(err) {
				return dev, err
			}
		}
		if isFDExhausted(err) {
			if s.fds == nil || s.fds.shouldLog() {
				s.lg.Error(fmt.Sprintf("open %s: too many open files (%d left for connections): %s",
					path, fdReserve, limitHint()))
			}
			return nil, &fs.PathError{Op: "open", Path: path, Err: unix.EMFILE}
		}
		return nil, err
	}
}

// acceptExhausted handles rule 3 after an accept failed with EMFILE or
// ENFILE: free the reserve, accept and close the waiting connection, take
// the reserve back. It reports whether a connection was taken off the
// queue (so the loop can go on at once).
func (s *Server) acceptExhausted() bool {
	g := s.fds
	g.mu.Lock()
	if g.reserve >= 0 {
		_ = unix.Close(g.reserve)
		g.reserve = -1
	}
	g.mu.Unlock()
	took := false
	if uc, err := s.ln.Accept(); err == nil {
		_ = uc.Close()
		took = true
	}
	g.mu.Lock()
	g.takeReserve()
	if took {
		g.refused++
	}
	n := g.refused
	g.mu.Unlock()
	if g.shouldLog() {
		s.lg.Error("accept: too many open files; connection closed", zap.Uint64("refused", n),
			zap.String("hint", limitHint()))
	}
	return took
}
