// Package process is the daemon's process setup below the transport: the
// run directory and its single-instance pid-file lock, the generated host
// name, resource limits and privileges (setrlimit, setuid/setgid,
// mlockall, SCHED_RR), and the descriptor rules that keep lease disks and
// connections from starving each other (docs/reliability.md). It knows
// nothing of the daemon's configuration or sockets: callers pass values.
package process

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/wire"
)

// ErrLocked is returned (wrapped) by LockPidFile (and so by the
// daemon's Start) when another daemon holds the
// lock file of the run directory.
var ErrLocked = errors.New("daemon: lock file held by another process")

// LockfileError is a failure to take the single-instance lock. Its message
// is the line sanlock logs, e.g. "lockfile setlk error
// /run/sanlock/sanlock.pid: Resource temporarily unavailable"; Running
// words a held lock for an operator.
type LockfileError struct {
	Op   string // "open", "setlk", "truncate", "write"
	Path string
	Err  error
	// Pid is, when another daemon holds the lock, its pid as the pid file
	// or the kernel's lock table tells it (0: not known).
	Pid int
}

// Running is the operator's text for a lock held by another daemon:
// "already running (pid N)", or, when the pid is not known, "already
// running (<path> is locked)".
func (e *LockfileError) Running() string {
	if e.Pid > 0 {
		return fmt.Sprintf("already running (pid %d)", e.Pid)
	}
	return fmt.Sprintf("already running (%s is locked)", e.Path)
}

func (e *LockfileError) Error() string {
	return fmt.Sprintf("lockfile %s error %s: %s", e.Op, e.Path, Strerror(e.Err))
}

func (e *LockfileError) Unwrap() []error {
	if e.Op == "setlk" && (errors.Is(e.Err, unix.EAGAIN) || errors.Is(e.Err, unix.EACCES)) {
		return []error{e.Err, ErrLocked}
	}
	return []error{e.Err}
}

// Strerror returns the C strerror text ("Resource temporarily unavailable").
func Strerror(err error) string {
	var en syscall.Errno
	if errors.As(err, &en) {
		s := en.Error()
		if s != "" {
			return string(s[0]-'a'+'A') + s[1:]
		}
	}
	return err.Error()
}

// PrepareRunDir creates the run directory dir if missing (mode 0775, only
// the last component) and chowns it to (uid, gid) (docs/cli.md "Startup"
// step 6: the daemon passes gid 0 when privileged). A chown failure is
// fatal.
func PrepareRunDir(dir string, uid, gid int) error {
	old := unix.Umask(0o002)
	err := os.Mkdir(dir, 0o775)
	unix.Umask(old)
	if err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("cannot create run dir %s: %w", dir, err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return fmt.Errorf("cannot chown run dir %s: %w", dir, err)
	}
	return nil
}

// LockPidFile opens the pid file at path (0644), takes a whole-file write
// lock without waiting, truncates it and writes "<pid>\n". sanlock uses a
// process-associated F_SETLK lock; we use an open-file-description lock
// (F_OFD_SETLK), which conflicts with sanlock's lock in the same way but
// also with a second Server in the same process (tests), and is not dropped
// when some other descriptor of the file in this process is closed. The returned file must stay
// open for the daemon's lifetime; closing it drops the lock. The pid file is
// not removed at exit, as in sanlock.
func LockPidFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, &LockfileError{Op: "open", Path: path, Err: err}
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		le := &LockfileError{Op: "setlk", Path: path, Err: err}
		if errors.Is(le, ErrLocked) {
			le.Pid = holderPid(f)
		}
		f.Close()
		return nil, le
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, &LockfileError{Op: "truncate", Path: path, Err: err}
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		f.Close()
		return nil, &LockfileError{Op: "write", Path: path, Err: err}
	}
	return f, nil
}

// CheckPidFile reports, without taking it or creating anything, whether
// another daemon holds the lock of the pid file at path: it returns the
// *LockfileError LockPidFile would (wrapping ErrLocked, with the holder's
// pid), or nil when the lock is free or the file cannot be opened (the
// daemon's own start then reports what is wrong).
func CheckPidFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil || lk.Type == unix.F_UNLCK {
		return nil
	}
	return &LockfileError{Op: "setlk", Path: path, Err: unix.EAGAIN, Pid: holderPid(f)}
}

// holderPid is the pid of the daemon holding the lock of the pid file f:
// the number the file holds, else the pid the kernel gives for a
// process-associated lock (sanlock's F_SETLK; an open-file-description
// lock has none), else 0.
func holderPid(f *os.File) int {
	b := make([]byte, 24)
	n, _ := f.ReadAt(b, 0)
	s := string(b[:n])
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		if pid, err := strconv.Atoi(s[:i]); err == nil && pid > 0 {
			return pid
		}
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err == nil && lk.Type != unix.F_UNLCK && lk.Pid > 0 {
		return int(lk.Pid)
	}
	return 0
}

// NewUUID returns a random (version 4, RFC 4122 variant) UUID in lower-case
// text form.
func NewUUID() (string, error) {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		return "", err
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	const hex = "0123456789abcdef"
	b := make([]byte, 0, 36)
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hex[c>>4], hex[c&0xf])
	}
	return string(b), nil
}

// Nodename returns uname's nodename.
func Nodename() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		h, _ := os.Hostname()
		return h
	}
	return unix.ByteSliceToString(u.Nodename[:])
}

// GenerateHostName returns "<uuid4>.<nodename>" cut to 48 bytes (spec:
// docs/cli.md "Startup" step 7).
func GenerateHostName(nodename string) (string, error) {
	u, err := NewUUID()
	if err != nil {
		return "", err
	}
	h := u + "." + nodename
	return h[:min(len(h), wire.NameLen)], nil
}
