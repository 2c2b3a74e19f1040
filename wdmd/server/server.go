// Package server is the wdmd daemon as a library: the startup sequence
// (pid file lock, crash marker, socket), the socket server (accept loop,
// SO_PEERCRED, one reader per connection) and the real script runner,
// around the pure test loop of package wdmd. cmd/internal/wdmdcli is the
// command-line shell over it.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/internal/sdnotify"
	"github.com/gosanlock/gosanlock/wdmd"
)

// Config is what Run needs: the options of the wdmd command line, the
// watchdog driver and the log.
type Config struct {
	RunDir        string // socket wdmd.sock and pid file wdmd.pid (wdmd: /run/wdmd)
	Marker        string // crash marker file (wdmd: /dev/shm/wdmd)
	Group         string // -G: group of the socket
	HighPriority  int    // -H
	AllowScripts  int    // -S
	ScriptDir     string // -s
	KillScriptSec int    // -k
	Device        string // -w: the watchdog device to try first
	TestInterval  int    // seconds between passing tests; 0: follows the device timeout (wdmd.IntervalFor)
	GridOnly      bool   // tests only on the interval grid, like 3.8.5
	TraceRecords  bool   // log every received record

	Driver wdmd.Driver
	Log    *zap.Logger // wdmd's log (package wdmd, Config.Log); nil: none
	// HandleSignals makes Run catch SIGTERM, SIGINT and SIGHUP (from the
	// point the test loop is set up, as wdmd does) and stop on them.
	HandleSignals bool
}

// ErrExit is returned by Run when wdmd stops on an error it has already
// logged (the wdmd command exits with status 255).
var ErrExit = errors.New("wdmd: stopped on an error")

// Run is the wdmd daemon once the process is set up (forked or not): the
// startup sequence of docs/wdmd.md "Startup" (pid file lock, crash marker,
// socket), then the test loop of package wdmd with the socket's accept
// loop (peers identified by SO_PEERCRED), until a signal ends it. It
// returns nil on a clean stop and ErrExit (already logged) otherwise.
func Run(cfg Config) error {
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	log := cfg.Log
	gid, groupErr := lookupGroup(cfg.Group)
	if groupErr != nil {
		log.Error(fmt.Sprintf("group '%s' not found, using socket gid: %d", cfg.Group, gid))
	}
	if cfg.HighPriority != 0 {
		HighPriority(log)
	}

	pidFile := filepath.Join(cfg.RunDir, "wdmd.pid")
	lock, err := lockPidFile(cfg.RunDir, pidFile)
	if err != nil {
		log.Error(err.Error())
		return ErrExit
	}
	defer func() {
		_ = os.Remove(pidFile)
		_ = lock.Close()
	}()

	marker, err := os.OpenFile(cfg.Marker, os.O_CREATE|os.O_EXCL|os.O_RDWR|unix.O_NOFOLLOW, 0o644)
	if err != nil {
		log.Error(fmt.Sprintf("other wdmd not cleanly stopped, shm_open error %d", errnoOf(err)))
		return ErrExit
	}
	_ = marker.Close()
	removeMarker := true
	defer func() {
		if removeMarker {
			_ = os.Remove(cfg.Marker)
		}
	}()

	events := make(chan wdmd.Event, 64)
	done := make(chan struct{})
	defer close(done)
	if cfg.HandleSignals {
		sigs := make(chan os.Signal, 8)
		signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
		defer signal.Stop(sigs)
		go forwardSignals(sigs, events, done)
	}

	m := wdmd.New(wdmd.Config{
		Driver:        cfg.Driver,
		Clock:         clock.NewSystem(),
		Log:           log,
		Scripts:       ExecRunner{},
		FirstDevice:   cfg.Device,
		TestInterval:  cfg.TestInterval,
		AllowScripts:  cfg.AllowScripts != 0,
		ScriptDir:     cfg.ScriptDir,
		KillScriptSec: cfg.KillScriptSec,
		GridOnly:      cfg.GridOnly,
		TraceRecords:  cfg.TraceRecords,
		Pid:           os.Getpid(),
		SocketGID:     gid,
		HighPriority:  cfg.HighPriority,
	})
	m.AddInternal("signal", -1)

	l, err := listen(filepath.Join(cfg.RunDir, "wdmd.sock"), gid)
	if err != nil {
		log.Error(err.Error())
		return ErrExit
	}
	defer l.Close()
	m.AddInternal("listen", fdOf(l))
	go acceptLoop(l, events, done, log)

	if err := m.Select(); err != nil {
		return ErrExit
	}
	// wdmd 3.9's start line, after the device probe.
	path, identity := m.Device()
	if identity == "" {
		identity = "unknown"
	}
	log.Error(fmt.Sprintf("wdmd started S%d H%d G%d using %s \"%s\"", cfg.AllowScripts, cfg.HighPriority, gid, path, identity))
	defer sdnotify.Start(nil)()
	if err := m.Run(context.Background(), events); err != nil {
		log.Error(err.Error())
		return ErrExit
	}
	return nil
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

func acceptLoop(l *net.UnixListener, events chan<- wdmd.Event, done <-chan struct{}, log *zap.Logger) {
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
			log.Error("accept error", zap.Error(err))
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
func readLoop(c *sockConn, events chan<- wdmd.Event, done <-chan struct{}, log *zap.Logger) {
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
				log.Error(fmt.Sprintf("fd %d recv size %d", c.fd, n))
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
