package wdmdcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/internal/sdnotify"
	"github.com/gosanlock/gosanlock/wdmd"
)

// daemonEnv marks the re-executed child that becomes the daemon.
const daemonEnv = "GOSANLOCK_WDMD_DAEMON"

// daemon runs the startup sequence of docs/wdmd.md "Startup" and the test loop; it
// returns the exit status.
func daemon(o *options, stderr io.Writer) int {
	gid, groupErr := lookupGroup(o.group)
	// Under a systemd Type=notify unit stay the process systemd started.
	if !o.foreground && os.Getenv(daemonEnv) == "" && !sdnotify.Active() {
		return fork(stderr)
	}
	log := newLogger("wdmd", o.foreground, stderr)
	defer log.close()
	log.Errorf("wdmd started S%d H%d G%d", o.allowScripts, o.highPriority, gid)
	if groupErr != nil {
		log.Errorf("group '%s' not found, using socket gid: %d", o.group, gid)
	}
	if o.highPriority != 0 {
		highPriority(log)
	}

	pidFile := filepath.Join(o.runDir, "wdmd.pid")
	lock, err := lockPidFile(o.runDir, pidFile)
	if err != nil {
		log.Errorf("%v", err)
		return 255
	}
	defer func() {
		_ = os.Remove(pidFile)
		_ = lock.Close()
	}()

	marker, err := os.OpenFile(o.marker, os.O_CREATE|os.O_EXCL|os.O_RDWR|unix.O_NOFOLLOW, 0o644)
	if err != nil {
		log.Errorf("other wdmd not cleanly stopped, shm_open error %d", errnoOf(err))
		return 255
	}
	_ = marker.Close()
	removeMarker := true
	defer func() {
		if removeMarker {
			_ = os.Remove(o.marker)
		}
	}()

	events := make(chan wdmd.Event, 64)
	done := make(chan struct{})
	defer close(done)
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
	defer signal.Stop(sigs)
	go forwardSignals(sigs, events, done)

	testInterval := o.testInterval
	if testInterval <= 0 {
		testInterval = wdmd.DefaultTestInterval
	}
	m := wdmd.New(wdmd.Config{
		Driver:        o.driver(),
		Clock:         clock.NewSystem(),
		Log:           log,
		Scripts:       execRunner{},
		FirstDevice:   o.device,
		TestInterval:  testInterval,
		AllowScripts:  o.allowScripts != 0,
		ScriptDir:     o.scriptDir,
		KillScriptSec: o.killScriptSec,
		GridOnly:      o.gridOnly,
		TraceRecords:  o.trace,
		Pid:           os.Getpid(),
		SocketGID:     gid,
		HighPriority:  o.highPriority,
	})
	m.AddInternal("signal", -1)

	l, err := listen(filepath.Join(o.runDir, "wdmd.sock"), gid)
	if err != nil {
		log.Errorf("%v", err)
		return 255
	}
	defer l.Close()
	m.AddInternal("listen", fdOf(l))
	go acceptLoop(l, events, done, log)

	if err := m.Arm(); err != nil {
		return 255
	}
	defer sdnotify.Start(nil)()
	if err := m.Run(context.Background(), events); err != nil {
		log.Errorf("%v", err)
		return 255
	}
	return 0
}

// fork starts the daemon as a new session leader with stdio on /dev/null
// and cwd /, and returns 0 at once, like daemon(3) in the parent.
func fork(stderr io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "cannot fork daemon")
		return 1
	}
	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Env = append(os.Environ(), daemonEnv+"=1")
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "cannot fork daemon")
		return 1
	}
	_ = cmd.Process.Release()
	return 0
}

func lookupGroup(name string) (int, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, err
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil {
		return 0, err
	}
	return gid, nil
}

// lockPidFile creates the run dir (0775 under the umask), takes a
// non-blocking whole-file write lock on the pid file and writes our pid.
func lockPidFile(dir, path string) (*os.File, error) {
	_ = os.MkdirAll(dir, 0o775)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lockfile open error %s: %s", path, strerror(err))
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0}
	if err := unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lockfile setlk error %s: %s", path, strerror(err))
	}
	if err := f.Truncate(0); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lockfile truncate error %s: %s", path, strerror(err))
	}
	if _, err := fmt.Fprintf(f, "%d\n", os.Getpid()); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lockfile write error %s: %s", path, strerror(err))
	}
	return f, nil
}

// strerror is the C text of err's errno ("Resource temporarily unavailable").
func strerror(err error) string {
	var e unix.Errno
	if errors.As(err, &e) {
		s := e.Error()
		if s != "" {
			return string(s[0]-'a'+'A') + s[1:]
		}
	}
	return err.Error()
}

func errnoOf(err error) int {
	var e unix.Errno
	if errors.As(err, &e) {
		return int(e)
	}
	return int(unix.EIO)
}

// listen creates the socket: stale path removed, mode 0660, group gid.
// It is left in place on exit, like wdmd 3.8.5.
func listen(path string, gid int) (*net.UnixListener, error) {
	_ = os.Remove(path)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("setup_listener_socket %s error %v", path, err)
	}
	l.SetUnlinkOnClose(false)
	_ = os.Chmod(path, 0o660)
	_ = os.Chown(path, -1, gid)
	return l, nil
}

type fder interface {
	SyscallConn() (syscall.RawConn, error)
}

func fdOf(c fder) int {
	rc, err := c.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	_ = rc.Control(func(f uintptr) { fd = int(f) })
	return fd
}

func forwardSignals(sigs <-chan os.Signal, events chan<- wdmd.Event, done <-chan struct{}) {
	for {
		var s os.Signal
		select {
		case s = <-sigs:
		case <-done:
			return
		}
		ev := wdmd.Event{Kind: wdmd.EvSignal, Signal: wdmd.SigTerm}
		switch s {
		case unix.SIGINT:
			ev.Signal = wdmd.SigInt
		case unix.SIGHUP:
			ev.Signal = wdmd.SigHup
		}
		select {
		case events <- ev:
		case <-done:
			return
		}
	}
}

func acceptLoop(l *net.UnixListener, events chan<- wdmd.Event, done <-chan struct{}, log wdmd.Logger) {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			select {
			case <-done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			log.Errorf("accept error %v", err)
			time.Sleep(100 * time.Millisecond) // e.g. EMFILE: do not spin
			continue
		}
		conn := &sockConn{c: c, fd: fdOf(c)}
		select {
		case events <- wdmd.Event{Kind: wdmd.EvAccept, Conn: conn}:
		case <-done:
			_ = c.Close()
			return
		}
		go readLoop(conn, events, done, log)
	}
}

// readLoop turns one connection into events: every complete 176-byte
// record in order, then one hangup at end of file, on a read error or on
// a partial record (docs/wdmd.md "Client protocol": all complete records are applied before
// the hangup).
func readLoop(c *sockConn, events chan<- wdmd.Event, done <-chan struct{}, log wdmd.Logger) {
	send := func(ev wdmd.Event) bool {
		select {
		case events <- ev:
			return true
		case <-done:
			return false
		}
	}
	buf := make([]byte, wdmd.RecordSize)
	for {
		n, err := io.ReadFull(c.c, buf)
		if err != nil {
			if n > 0 {
				log.Errorf("fd %d recv size %d", c.fd, n)
			}
			send(wdmd.Event{Kind: wdmd.EvHangup, Conn: c})
			return
		}
		var r wdmd.Record
		_ = r.Unmarshal(buf)
		if !send(wdmd.Event{Kind: wdmd.EvRecord, Conn: c, Record: r}) {
			return
		}
	}
}

// sockConn is an accepted connection.
type sockConn struct {
	c    *net.UnixConn
	fd   int
	once sync.Once
}

func (s *sockConn) Fd() int { return s.fd }

func (s *sockConn) PeerPid() (int, error) {
	rc, err := s.c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, cerr
	}
	return int(cred.Pid), nil
}

// Send writes a reply; a client that does not read within a second loses
// its connection rather than stalling the test loop.
func (s *sockConn) Send(b []byte) error {
	_ = s.c.SetWriteDeadline(time.Now().Add(time.Second))
	_, err := s.c.Write(b)
	return err
}

func (s *sockConn) Close() error {
	var err error
	s.once.Do(func() { err = s.c.Close() })
	return err
}
