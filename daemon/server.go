package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/daemon/config"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/diskio"
	"github.com/gosanlock/gosanlock/handover/serving"
	"github.com/gosanlock/gosanlock/internal/process"
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/wire"
)

// Version is the sanlock version this daemon reports.
const Version = "3.8.5"

// DefaultMaxConns is the size of sanlock's connection table; slots 0 and 1
// are the internal "helper" and "listener" records (docs/protocol.md "Transport").
const DefaultMaxConns = 1024

// firstConnSlot is the first slot given to an accepted connection.
const firstConnSlot = 2

// ErrServerClosed is returned by Wait after a normal shutdown.
var ErrServerClosed = errors.New("daemon: server closed")

// Deps are the collaborators of a Server. Zero values select the
// production choices.
type Deps struct {
	// Manager is what the daemon's lease manager is built with, at Start,
	// beyond what the daemon gives it itself (its logger, context, host
	// name, options, client registry and renewal metrics): the zero value
	// is production; tests put in-memory disks, fake kills or clocks here.
	// Server.Manager returns the manager once started.
	Manager manager.Setup
	// LogCore, when set, receives every log entry as well (e.g. a
	// zaptest/observer core in tests).
	LogCore zapcore.Core
	// Stderr receives the -D log output (nil: os.Stderr).
	Stderr io.Writer
	// OnClientDead, when set, runs after the manager's Resources.ClientDead for
	// every registered connection that ends while the daemon is running.
	OnClientDead func(*ClientInfo)
	// Tuning, when set, is told when each client request begins and ends
	// and when a burst of work has settled, so that the daemon process can
	// fit its memory and processor use to it (internal/memtune; the daemon
	// process only: it changes the whole process).
	Tuning Tuning
}

// Tuning is what the daemon tells the process's tuning about its work.
// Every method must return at once.
type Tuning interface {
	// RequestBegin and RequestEnd bracket every client request, on the
	// connection's goroutine.
	RequestBegin()
	RequestEnd()
	// Settled runs when a lockspace that was joined (or adopted at a
	// reexec) has renewed twice, on the renewal's goroutine, and after every
	// leaseBurst-th acquire or release, on the handler's goroutine. The
	// daemon process then drops, once the calls stop, its mappings of the
	// binary that the joins or the acquires needed, and the heap their
	// garbage left (docs/performance.md "Binary pages", "Held leases").
	Settled()
}

// leaseBurst: acquires and releases between two calls of Tuning.Settled.
// Small enough that a burst of a few dozen calls (a host starting its
// guests) is followed by a trim, large enough that a steady load calls it
// a few times a second at most.
const leaseBurst = 32

// Server is the sanlock daemon's socket server: run directory, lock file,
// logging, the listening socket and one goroutine per connection. Commands
// are dispatched through a registry (Handle); the built-in commands that
// need no leases are registered by New.
type Server struct {
	cfg  Config
	deps Deps
	// leaseOps counts acquires and releases (leaseWork).
	leaseOps atomic.Uint32

	logs     *logSinks
	lg       *zap.Logger
	hostName string
	nodename string
	startMon uint64

	hmu      sync.RWMutex
	handlers map[wire.Cmd]route

	mu      sync.Mutex
	slots   []*Conn // index = slot; nil = free (0 and 1 are internal)
	waiters []*Conn // SHUTDOWN_WAIT connections, answered at exit
	closing bool

	ln     net.Listener // a *net.UnixListener, except with Serve
	lnFD   int
	fds    *process.FDGuard // descriptor rules (fdrules.go); nil before Start
	nofile uint64           // soft RLIMIT_NOFILE after the raise at start
	lockf  *os.File
	ctx    context.Context
	cancel context.CancelFunc

	stopOnce sync.Once
	stopCh   chan struct{} // closed when a stop has been requested
	done     chan struct{} // closed when the server has fully stopped
	conns    sync.WaitGroup
	started  bool

	metrics metricsRef    // the -M endpoint (metrics.go)
	lastID  atomic.Uint64 // the last manager.ClientID given to a connection
	// reg holds the client state of each connection; the lease manager
	// shares it (Setup.Clients).
	reg *manager.ClientRegistry
	// mgr is the lease manager, built by startManager (nil before).
	mgr *manager.Manager

	// fails is the last failure of each client process (lasterror.go).
	fails *failureTable

	// holders lists the pids holding a resource (strict peer checks).
	holders func(space, name string) []int

	gate serving.Gate  // handover: the quiesce gate
	rx   handoverFiles // ... and the state's duplicates (handover.go)
}

// New returns a server for cfg (copied). Nothing touches the system until
// Start. cfg should have had ApplyEnv applied.
func New(cfg *Config, deps Deps) *Server {
	if deps.Stderr == nil {
		deps.Stderr = os.Stderr
	}
	if deps.Manager.Clock == nil {
		// Set here rather than by the manager: STATUS reports this
		// clock's time (monoSeconds).
		deps.Manager.Clock = clock.NewSystem()
	}
	s := &Server{
		cfg:      *cfg,
		deps:     deps,
		handlers: make(map[wire.Cmd]route),
		stopCh:   make(chan struct{}),
		done:     make(chan struct{}),
		lg:       zap.NewNop(),
		lnFD:     -1,
		reg:      manager.NewClientRegistry(),
		fails:    newFailureTable(),
	}
	if s.cfg.MaxConns <= firstConnSlot {
		s.cfg.MaxConns = DefaultMaxConns
	}
	if s.cfg.MaxPayload <= 0 {
		s.cfg.MaxPayload = wire.DefaultMaxPayload
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.registerBuiltins()
	return s
}

// Config returns a copy of the configuration in effect.
func (s *Server) Config() Config { return s.cfg }

// Logger returns the daemon logger (a no-op logger before Start).
func (s *Server) Logger() *zap.Logger { return s.lg }

// HostName returns our host name (valid after Start).
func (s *Server) HostName() string { return s.hostName }

// SockPath returns the socket path.
func (s *Server) SockPath() string { return filepath.Join(s.cfg.RunDir, SockName) }

// LogDump returns the in-memory log as LOG_DUMP sends it: lines separated
// by newlines, without a newline after the last one (as the 3.8.5 daemon
// does; `sanlock client log_dump` then prints one).
func (s *Server) LogDump() []byte {
	if s.logs == nil {
		return nil
	}
	return bytes.TrimSuffix(s.logs.Ring.Dump(), []byte("\n"))
}

// Done is closed when the server has stopped.
func (s *Server) Done() <-chan struct{} { return s.done }

// Start performs the daemon startup of docs/cli.md "Startup" that applies in-process
// (no fork): logging and its warnings, privileged limits, run directory and
// lock file, host name, setuid, mlockall/priority, then the socket, and
// starts serving in the background. On error everything acquired is
// released; the error text is the line sanlock logs (e.g. "lockfile setlk
// error <path>: Resource temporarily unavailable", wrapping ErrLocked).
func (s *Server) Start() (err error) {
	if s.started {
		return errors.New("daemon: already started")
	}
	s.started = true
	cfg := &s.cfg
	cfg.ResolveIDs()

	s.openLog()
	defer func() {
		if err != nil {
			s.failStart(err)
		}
	}()

	for _, w := range cfg.Warnings() {
		s.lg.Warn(w)
	}
	s.nofile = raiseNofile()
	s.lg.Debug("descriptor limit", zap.Uint64("nofile", s.nofile))
	if cfg.Privileged {
		if err := process.SetLimits(); err != nil {
			return err
		}
	}
	if cfg.RunDir != config.DefaultRunDir {
		// 3.8.5's line, word for word.
		s.lg.Warn(fmt.Sprintf("Using non-standard run directory '%s'", cfg.RunDir))
	}
	if !cfg.Privileged {
		s.lg.Warn("Running in unprivileged mode")
	}

	runGID := cfg.GID
	if cfg.Privileged {
		runGID = 0
	}
	if err := process.PrepareRunDir(cfg.RunDir, cfg.UID, runGID); err != nil {
		return err
	}
	if s.lockf, err = process.LockPidFile(filepath.Join(cfg.RunDir, PidFileName)); err != nil {
		return err
	}

	if err := s.setHostName(); err != nil {
		return err
	}

	if cfg.Privileged && (cfg.UserName != "" || cfg.GroupName != "") {
		if err := process.DropPrivileges(cfg.UserName, cfg.UID, cfg.GID); err != nil {
			return err
		}
	}

	// The start line, word for word (scripts look for it); with a
	// non-default io_timeout or watchdog_fire_timeout both follow, as in
	// 3.9.5.
	msg := fmt.Sprintf("sanlock daemon started %s host %s (%s)", Version, s.hostName, s.nodename)
	if cfg.IOTimeout != config.DefaultIOTimeout || cfg.WatchdogFireTimeout != config.DefaultWatchdogFireTimeout {
		msg += fmt.Sprintf(" io_timeout %d watchdog_fire_timeout %d", cfg.IOTimeout, cfg.WatchdogFireTimeout)
	}
	s.lg.Warn(msg)

	s.setPriority()

	s.startManager()
	if err := s.listen(); err != nil {
		return err
	}
	s.fds = newFDGuard()
	s.conns.Add(1)
	go s.acceptLoop()
	return nil
}

// startManager builds the lease manager from Deps.Manager and what the
// daemon now knows (logger, host name), and registers the commands that
// need it. Its disk opens keep the descriptor reserve (fdrules.go).
func (s *Server) startManager() {
	st := s.deps.Manager
	st.Log, st.Context, st.HostName, st.Settings = s.lg, s.ctx, s.hostName, managerSettings(&s.cfg)
	st.Clients, st.OnRenewal = s.reg, s.renewalHook
	open := st.Open
	if open == nil {
		open = func(p string) (diskfmt.Device, error) { return diskio.OpenFile(p) }
	}
	st.Open = s.guardOpen(open)
	s.mgr = manager.New(st)
	s.holders = s.mgr.Resources.Holders
	s.registerLockspaceCmds(s.mgr.Lockspaces)
	s.registerResourceCmds(s.mgr.Resources)
	s.registerDiskCmds(s.mgr.Disk)
}

// Manager returns the lease manager (nil before Start).
func (s *Server) Manager() *manager.Manager { return s.mgr }

// lockspaceCount is the number of lockspaces in any state (0 before Start).
func (s *Server) lockspaceCount() int {
	if s.mgr == nil {
		return 0
	}
	return s.mgr.Lockspaces.Count()
}

// Serve runs the daemon on ln, a listener the caller made, until ctx ends
// or the daemon stops; it returns ErrServerClosed. It is Start without the
// process setup (no run directory, lock file, privileges, socket file or
// limits): logging, the lease manager and the accept loop only, so that
// protocol tests can run over in-memory connections (net.Pipe). A
// connection that is not a Unix socket has no peer credentials (REGISTER
// fails) unless it has a method PeerPid() int, and cannot be an event
// listener.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.started {
		return errors.New("daemon: already started")
	}
	s.started = true
	s.openLog()
	if err := s.setHostName(); err != nil {
		s.failStart(err)
		return err
	}
	s.startManager()
	s.ln = ln
	s.fds = newFDGuard()
	s.conns.Add(1)
	go s.acceptLoop()
	return s.Wait(ctx)
}

// openLog opens the log sinks and notes the start time (Start, Serve).
func (s *Server) openLog() {
	s.logs = newLogSinks(&s.cfg, s.deps.Stderr, s.deps.LogCore)
	s.lg = s.logs.lg
	s.startMon = s.monoSeconds()
}

// setHostName sets our host name (docs/cli.md "Startup"): the configured
// one, else "<product uuid>.<nodename>", else "<random uuid>.<nodename>",
// cut to 48 bytes, and logs where it came from as 3.9.5 does (Start,
// Serve).
func (s *Server) setHostName() (err error) {
	s.nodename = Nodename()
	if long, ok := s.cfg.HostNameShortened(); ok {
		s.lg.Warn(fmt.Sprintf("our_host_name shortened from config %s len %d to: %s", long, len(long), s.cfg.OurHostName))
	}
	if s.hostName = s.cfg.OurHostName; s.hostName != "" {
		return nil
	}
	if uuid, ok := readProductUUID(); ok {
		name, reason, ok := config.ProductUUIDHostName(uuid, s.nodename)
		if ok {
			s.hostName = name
			s.lg.Info("our_host_name set from product_uuid: " + name)
			return nil
		}
		s.lg.Warn(reason)
	}
	if s.hostName, err = process.GenerateHostName(s.nodename); err != nil {
		return fmt.Errorf("cannot generate host name: %w", err)
	}
	s.lg.Info("our_host_name set from uuid_generate: " + s.hostName)
	return nil
}

// productUUIDPath is where the machine's product uuid is read (sysfs,
// readable by root only); tests point it elsewhere.
var productUUIDPath = "/sys/devices/virtual/dmi/id/product_uuid"

// readProductUUID returns the first line of productUUIDPath, false when
// it cannot be read.
func readProductUUID() (string, bool) {
	b, err := os.ReadFile(productUUIDPath)
	if err != nil {
		return "", false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return line, true
}

// failStart logs the error of a failed Start or Serve and undoes it.
func (s *Server) failStart(err error) {
	s.lg.Error(err.Error())
	s.releaseStartup()
	close(s.done)
}

// releaseStartup undoes a partial Start.
func (s *Server) releaseStartup() {
	if s.ln != nil {
		_ = s.ln.Close()
	}
	if s.lockf != nil {
		_ = s.lockf.Close()
		s.lockf = nil
	}
	if s.fds != nil {
		s.fds.Close()
	}
	s.cancel()
	if s.logs != nil {
		s.logs.Close()
	}
}

// listen creates the socket (docs/protocol.md "Transport"): unlink a stale file, bind, chmod
// 0660, chown uid:gid (fatal), listen.
func (s *Server) listen() error {
	path := s.SockPath()
	if len(path) > 107 {
		return fmt.Errorf("socket path %s longer than 107 bytes", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cannot remove stale socket %s: %w", path, err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return fmt.Errorf("cannot bind socket %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(false) // sanlock leaves the socket behind
	s.ln = ln
	if err := os.Chmod(path, 0o660); err != nil {
		return fmt.Errorf("cannot chmod socket %s: %w", path, err)
	}
	if err := os.Chown(path, s.cfg.UID, s.cfg.GID); err != nil {
		return fmt.Errorf("cannot chown socket %s: %w", path, err)
	}
	if rc, err := ln.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { s.lnFD = int(fd) })
	}
	return nil
}

// acceptLoop accepts until the listener is closed. Out of descriptors, it
// takes the waiting connection off the queue and closes it (nofile.go), so
// the listener never stalls; on other errors it backs off (capped at 1 s).
func (s *Server) acceptLoop() {
	defer s.conns.Done()
	var delay time.Duration
	for {
		uc, err := s.ln.Accept()
		if err != nil && s.acceptTimedOut(err) {
			continue
		}
		if err != nil {
			select {
			case <-s.stopCh:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if process.IsFDExhausted(err) && s.fds != nil && s.acceptExhausted() {
				delay = 0
				continue
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.lg.Error("accept error", zap.Error(err))
			select {
			case <-time.After(delay):
			case <-s.stopCh:
				return
			}
			continue
		}
		delay = 0
		s.addConn(uc)
	}
}

// PeerPidConn is a connection given to Serve that is not a Unix socket
// (tests' in-memory connections) and names its peer's pid itself.
type PeerPidConn interface {
	net.Conn
	PeerPid() int
}

// addConn records the peer pid (SO_PEERCRED), takes the lowest free slot
// and starts the connection goroutine. With a full table the connection is
// closed.
func (s *Server) addConn(uc net.Conn) {
	c := &Conn{srv: s, uc: uc, fd: -1, peerPid: -1, peerUID: -1, id: manager.ClientID(s.lastID.Add(1))}
	if p, ok := uc.(PeerPidConn); ok {
		c.peerPid = p.PeerPid() // an in-memory connection of Serve
	}
	if rc, err := c.rawConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			c.fd = int(fd)
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED, 1)
			if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
				c.peerPid, c.peerUID = int(cred.Pid), int(cred.Uid)
			}
		})
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		_ = uc.Close()
		return
	}
	slot := -1
	for i := firstConnSlot; i < len(s.slots); i++ {
		if s.slots[i] == nil {
			slot = i
			break
		}
	}
	if slot < 0 {
		if len(s.slots) < firstConnSlot {
			s.slots = make([]*Conn, firstConnSlot, 16)
		}
		if len(s.slots) >= s.cfg.MaxConns {
			s.mu.Unlock()
			s.lg.Error("no free connection slot")
			_ = uc.Close()
			return
		}
		slot = len(s.slots)
		s.slots = append(s.slots, nil)
	}
	c.slot = slot
	s.slots[slot] = c
	s.conns.Add(1)
	s.mu.Unlock()
	s.reg.Add(c.id, manager.ClientStatus{Order: slot, Pid: -1})
	go c.serve()
}

// freeSlot releases c's slot and forgets its client state.
func (s *Server) freeSlot(c *Conn) {
	s.reg.Remove(c.id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.slot >= 0 && c.slot < len(s.slots) && s.slots[c.slot] == c {
		s.slots[c.slot] = nil
	}
	for n := len(s.slots); n > firstConnSlot && s.slots[n-1] == nil; n-- {
		s.slots = s.slots[:n-1]
	}
}

// isClosing reports whether the server is stopping.
func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// RequestShutdown asks the daemon to exit (SIGTERM, SHUTDOWN,
// SHUTDOWN_WAIT; docs/cli.md "Signals and exit"). Without force it is refused, and false is
// returned, while any lockspace exists. With force the lockspace manager
// first kills the lease holders and drops every lockspace.
func (s *Server) RequestShutdown(force bool) bool {
	if !force && s.lockspaceCount() > 0 {
		s.lg.Warn("ignore shutdown, lockspace exists")
		return false
	}
	go func() {
		if force && s.mgr != nil {
			if err := s.mgr.Lockspaces.ShutdownAll(s.ctx); err != nil {
				s.lg.Error("forced shutdown", zap.Error(err))
			}
		}
		s.Stop()
	}()
	return true
}

// Stop stops the server at once, whatever lockspaces exist: it stops
// accepting, answers SHUTDOWN_WAIT connections, closes every connection,
// waits for their goroutines and releases the lock file. The socket and pid
// files are left behind, as sanlock does. Safe to call many times and
// before Start.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		close(s.stopCh)
		if !s.started {
			close(s.done)
			return
		}
		select {
		case <-s.done: // Start failed
			return
		default:
		}
		s.mu.Lock()
		s.closing = true
		waiters := s.waiters
		s.waiters = nil
		var open []*Conn
		for _, c := range s.slots {
			if c != nil {
				open = append(open, c)
			}
		}
		s.mu.Unlock()

		_ = s.ln.Close()
		s.cancel()
		for _, c := range waiters {
			h := wire.ShutdownWaitFinalReply()
			_ = c.write(h.Bytes())
			_ = c.uc.Close()
			s.freeSlot(c)
		}
		for _, c := range open {
			_ = c.uc.Close()
		}
		s.conns.Wait()
		if s.mgr != nil {
			s.mgr.Stop() // its goroutines end with s.ctx
		}
		s.lg.Debug("daemon exit")
		s.releaseStartup()
		close(s.done)
	})
}

// Wait blocks until the server has stopped or ctx ends (then it stops the
// server). It returns ErrServerClosed.
func (s *Server) Wait(ctx context.Context) error {
	select {
	case <-s.done:
	case <-ctx.Done():
		s.Stop()
	}
	return ErrServerClosed
}

// addWaiter parks a SHUTDOWN_WAIT connection until exit.
func (s *Server) addWaiter(c *Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.waiters = append(s.waiters, c)
	return true
}

// clients returns the open connections in slot order.
// clientAt is the connection in slot i (the ci= of its CLIENT record), or
// nil.
func (s *Server) clientAt(i int) *Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < firstConnSlot || i >= len(s.slots) {
		return nil
	}
	return s.slots[i]
}

func (s *Server) clients() []*Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Conn
	for _, c := range s.slots {
		if c != nil {
			out = append(out, c)
		}
	}
	return out
}
