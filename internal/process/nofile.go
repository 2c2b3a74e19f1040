package process

import (
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Descriptors (docs/reliability.md). Lease disks and connections share the
// daemon's RLIMIT_NOFILE. Three rules keep one kind from starving the
// other:
//
//  1. At start the soft limit is raised to the hard limit (the limit a
//     unit sets with LimitNOFILE=).
//  2. A disk open (lockspace or resource) is refused with EMFILE when fewer
//     than FDReserve descriptors would be left, so connections (status,
//     release, other clients' acquires) always have descriptors. The
//     acquire that hit it fails with -24 and an error line names the limit
//     and how to raise it.
//  3. The listener never stalls on EMFILE/ENFILE: it closes a reserve
//     descriptor, accepts the waiting connection and closes it at once (the
//     client sees the connection closed, not a hang), then takes the
//     reserve again. Connections already open are not affected.

// FDReserve is how many descriptors disk opens leave for connections and
// the daemon's own use (log file, wdmd sockets, kill programs).
const FDReserve = 64

// fdLogEvery rate-limits the "out of descriptors" error lines.
const fdLogEvery = 10 * time.Second

// RaiseNofile sets the soft RLIMIT_NOFILE to the hard one and returns the
// resulting soft limit (0 if it cannot be read).
func RaiseNofile() uint64 {
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

// NofileLimit returns the current soft RLIMIT_NOFILE (0 if unknown).
func NofileLimit() uint64 {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return rl.Cur
}

// FDGuard keeps the reserve descriptor of rule 3 and rate-limits the
// error lines of rules 2 and 3, for one server.
type FDGuard struct {
	mu      sync.Mutex
	reserve int // a /dev/null descriptor held for rule 3, or -1
	lastLog time.Time
	refused uint64 // connections closed at accept for lack of descriptors
}

// NewFDGuard takes the reserve descriptor.
func NewFDGuard() *FDGuard {
	g := &FDGuard{reserve: -1}
	g.takeReserve()
	return g
}

func (g *FDGuard) takeReserve() {
	if g.reserve >= 0 {
		return
	}
	if fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
		g.reserve = fd
	}
}

// Close drops the reserve descriptor.
func (g *FDGuard) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.reserve >= 0 {
		_ = unix.Close(g.reserve)
		g.reserve = -1
	}
}

// IsFDExhausted reports EMFILE or ENFILE.
func IsFDExhausted(err error) bool {
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE)
}

// Headroom reports whether a disk open may take a descriptor: the lowest
// free descriptor number (probed with an open of /dev/null) must stay
// below limit-FDReserve.
func Headroom() error {
	fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	_ = unix.Close(fd)
	if lim := NofileLimit(); lim > FDReserve && uint64(fd) >= lim-FDReserve {
		return unix.EMFILE
	}
	return nil
}

// ShouldLog rate-limits the error lines (one per fdLogEvery).
func (g *FDGuard) ShouldLog() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now := time.Now(); now.Sub(g.lastLog) >= fdLogEvery {
		g.lastLog = now
		return true
	}
	return false
}

// LimitHint is the advice every "out of descriptors" line ends with.
func LimitHint() string {
	return fmt.Sprintf("the daemon's descriptor limit RLIMIT_NOFILE is %d; raise it with LimitNOFILE= in the "+
		"sanlock unit (systemctl edit sanlock) or ulimit -n before starting the daemon", NofileLimit())
}

// AcceptExhausted is rule 3 after an accept failed with EMFILE or ENFILE:
// free the reserve, run acceptClose (accept the waiting connection and
// close it; it reports whether one was taken), take the reserve back. It
// returns whether a connection was taken off the queue and how many have
// been refused so far.
func (g *FDGuard) AcceptExhausted(acceptClose func() bool) (took bool, refused uint64) {
	g.mu.Lock()
	if g.reserve >= 0 {
		_ = unix.Close(g.reserve)
		g.reserve = -1
	}
	g.mu.Unlock()
	took = acceptClose()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.takeReserve()
	if took {
		g.refused++
	}
	return took, g.refused
}

// GuardOpen is rule 2 around a disk open: the open is refused with an
// EMFILE *fs.PathError when fewer than FDReserve descriptors would be left
// after it (Headroom) or when it ran out itself; refused(path) is called
// first (the caller logs, rate-limited by ShouldLog).
func GuardOpen[D any](open func(string) (D, error), refused func(path string)) func(string) (D, error) {
	return func(path string) (D, error) {
		err := Headroom()
		if err == nil {
			var dev D
			if dev, err = open(path); err == nil || !IsFDExhausted(err) {
				return dev, err
			}
		}
		var none D
		if IsFDExhausted(err) {
			refused(path)
			return none, &fs.PathError{Op: "open", Path: path, Err: unix.EMFILE}
		}
		return none, err
	}
}
