package daemon

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/daemon/config"
)

// File names inside the run directory (docs/cli.md "Startup").
const (
	PidFileName = "sanlock.pid"
	SockName    = "sanlock.sock"
)

// ErrLocked is returned (wrapped) by Start when another daemon holds the
// lock file of the run directory.
var ErrLocked = errors.New("daemon: lock file held by another process")

// LockfileError is a failure to take the single-instance lock. Its message
// is the line sanlock logs, e.g. "lockfile setlk error
// /run/sanlock/sanlock.pid: Resource temporarily unavailable".
type LockfileError struct {
	Op   string // "open", "setlk", "truncate", "write"
	Path string
	Err  error
}

func (e *LockfileError) Error() string {
	return fmt.Sprintf("lockfile %s error %s: %s", e.Op, e.Path, strerror(e.Err))
}

func (e *LockfileError) Unwrap() []error {
	if e.Op == "setlk" && (errors.Is(e.Err, unix.EAGAIN) || errors.Is(e.Err, unix.EACCES)) {
		return []error{e.Err, ErrLocked}
	}
	return []error{e.Err}
}

// strerror returns the C strerror text ("Resource temporarily unavailable").
func strerror(err error) string {
	var en syscall.Errno
	if errors.As(err, &en) {
		s := en.Error()
		if s != "" {
			return string(s[0]-'a'+'A') + s[1:]
		}
	}
	return err.Error()
}

// prepareRunDir creates the run directory if missing (mode 0775, only the
// last component) and chowns it to (uid, 0) when privileged or (uid, gid)
// otherwise (docs/cli.md "Startup" step 6). A chown failure is fatal.
func prepareRunDir(cfg *Config) error {
	old := unix.Umask(0o002)
	err := os.Mkdir(cfg.RunDir, 0o775)
	unix.Umask(old)
	if err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("cannot create run dir %s: %w", cfg.RunDir, err)
	}
	gid := cfg.GID
	if cfg.Privileged {
		gid = 0
	}
	if err := os.Chown(cfg.RunDir, cfg.UID, gid); err != nil {
		return fmt.Errorf("cannot chown run dir %s: %w", cfg.RunDir, err)
	}
	return nil
}

// lockFile opens <run dir>/sanlock.pid (0644), takes a whole-file write
// lock without waiting, truncates it and writes "<pid>\n". sanlock uses a
// process-associated F_SETLK lock; we use an open-file-description lock
// (F_OFD_SETLK), which conflicts with sanlock's lock in the same way but
// also with a second Server in the same process (tests), and is not dropped
// when some other descriptor of the file in this process is closed. The returned file must stay
// open for the daemon's lifetime; closing it drops the lock. The pid file is
// not removed at exit, as in sanlock.
func lockFile(runDir string) (*os.File, error) {
	path := filepath.Join(runDir, PidFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, &LockfileError{Op: "open", Path: path, Err: err}
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		f.Close()
		return nil, &LockfileError{Op: "setlk", Path: path, Err: err}
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
	return config.TruncName(u + "." + nodename), nil
}
