package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/handover"
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// Live re-exec (issue 14, docs/upgrade.md): the Server is the
// handover.Source of a running daemon. Quiesce stops the accept loop and
// every connection reader at a message boundary and waits for the
// commands in flight; Resume undoes it.

// errNotHandedOver is a connection state the handover cannot carry yet.
var errNotHandedOver = errors.New("cannot be handed over yet")

// quiesceTimeout bounds the wait for readers and commands in flight.
const quiesceTimeout = 2 * time.Second

// reexecState is the quiesce gate of a Server.
type reexecState struct {
	mu       sync.Mutex
	cond     *sync.Cond
	quiesced bool
	serving  int // connection readers that have started
	parked   int // readers waiting at a message boundary
	busy     int // requests between their first byte and the end of their dispatch
	accept   bool
	adopted  bool       // this image took over from another (reexec_new.go)
	files    []*os.File // duplicates made for Snapshot/Quiesce, closed by release
}

func (g *reexecState) c() *sync.Cond {
	if g.cond == nil {
		g.cond = sync.NewCond(&g.mu)
	}
	return g.cond
}

// park waits while the daemon is quiesced; it reports whether it waited.
func (g *reexecState) park(counter *int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.quiesced {
		return false
	}
	*counter++
	g.c().Broadcast()
	for g.quiesced {
		g.c().Wait()
	}
	*counter--
	return true
}

func (g *reexecState) parkAccept() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.quiesced {
		return false
	}
	g.accept = true
	g.c().Broadcast()
	for g.quiesced {
		g.c().Wait()
	}
	g.accept = false
	return true
}

// connReader reads a connection's requests through the quiesce gate.
// Between requests (begin) it parks while the daemon is quiesced; once a
// request's first byte is read it counts as busy until the next begin.
type connReader struct {
	c        *Conn
	started  bool
	inReq    bool
	ended    bool // the serve loop has stopped reading (closed or held)
	detached bool // cmdReexec's own connection
}

// reading reports whether c's serve loop reads requests: not before it
// starts, not after it ended or handed the connection to a handler.
func (s *Server) reading(c *Conn) (reading, held bool) {
	s.rx.mu.Lock()
	defer s.rx.mu.Unlock()
	return c.rd.started && !c.rd.ended, c.rd.ended && !c.rd.detached
}

// begin marks a message boundary: the previous request is done.
func (r *connReader) begin() {
	g := &r.c.srv.rx
	g.mu.Lock()
	if !r.started {
		r.started = true
		g.serving++
	}
	if r.inReq {
		r.inReq = false
		g.busy--
		g.c().Broadcast()
	}
	g.mu.Unlock()
}

// end is called when the reader stops for good.
func (r *connReader) end() {
	g := &r.c.srv.rx
	g.mu.Lock()
	detached := r.detached
	g.mu.Unlock()
	if detached {
		return
	}
	r.begin()
	g.mu.Lock()
	r.ended = true
	g.serving--
	g.c().Broadcast()
	g.mu.Unlock()
}

func (r *connReader) Read(p []byte) (int, error) {
	g := &r.c.srv.rx
	for {
		if !r.inReq && g.park(&g.parked) {
			_ = r.c.uc.SetReadDeadline(time.Time{})
		}
		n, err := r.c.uc.Read(p)
		if n > 0 && !r.inReq {
			g.mu.Lock()
			r.inReq = true
			g.busy++
			g.mu.Unlock()
		}
		if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
			if n > 0 {
				return n, nil
			}
			if r.inReq {
				// Inside a request: read it whole, it is processed first.
				_ = r.c.uc.SetReadDeadline(time.Time{})
			}
			continue
		}
		return n, err
	}
}

// acceptTimedOut is the accept loop's check after an Accept error: a
// deadline set by Quiesce parks the loop until Resume.
func (s *Server) acceptTimedOut(err error) bool {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	s.rx.parkAccept()
	if dl, ok := s.ln.(interface{ SetDeadline(time.Time) error }); ok {
		_ = dl.SetDeadline(time.Time{})
	}
	return true
}

// Snapshot implements handover.Source.
func (s *Server) Snapshot() (handover.Snapshot, error) { return s.handoverState() }

// Quiesce implements handover.Source.
func (s *Server) Quiesce() (handover.Snapshot, error) {
	g := &s.rx
	g.mu.Lock()
	g.quiesced = true
	g.mu.Unlock()
	past := time.Unix(1, 0)
	if dl, ok := s.ln.(interface{ SetDeadline(time.Time) error }); ok {
		_ = dl.SetDeadline(past)
	}
	for _, c := range s.clients() {
		// Only readers: a held connection (event listener) polls itself
		// and would take a deadline for its end. A reader that starts
		// later parks before its first read.
		if r, _ := s.reading(c); r {
			_ = c.uc.SetReadDeadline(past)
		}
	}
	deadline := time.Now().Add(quiesceTimeout)
	timer := time.AfterFunc(quiesceTimeout, func() {
		g.mu.Lock()
		g.c().Broadcast()
		g.mu.Unlock()
	})
	defer timer.Stop()
	g.mu.Lock()
	for !(g.accept && g.busy == 0 && g.parked == g.serving) {
		if time.Now().After(deadline) {
			busy, parked, serving := g.busy, g.parked, g.serving
			g.mu.Unlock()
			return handover.Snapshot{}, fmt.Errorf("daemon did not quiesce within %v: %d command(s) in progress, %d of %d reader(s) stopped",
				quiesceTimeout, busy, parked, serving)
		}
		g.c().Wait()
	}
	g.mu.Unlock()
	// No command runs now. Hold the renewals too: from here until Resume
	// (a failed handover) or our exit no lease is renewed or released by
	// this image (docs/upgrade.md "Adopting lockspaces").
	if mg := s.deps.Manager; mg != nil {
		ctx, cancel := context.WithTimeout(context.Background(), quiesceTimeout)
		err := mg.PauseRenewals(ctx)
		cancel()
		if err != nil {
			return handover.Snapshot{}, fmt.Errorf("renewals did not pause: %w", err)
		}
	}
	return s.handoverState()
}

// Resume implements handover.Source.
func (s *Server) Resume() {
	if mg := s.deps.Manager; mg != nil {
		mg.ResumeRenewals()
	}
	g := &s.rx
	g.mu.Lock()
	g.quiesced = false
	g.c().Broadcast()
	g.mu.Unlock()
}

// releaseHandoverFiles closes the duplicates Snapshot and Quiesce made.
func (s *Server) releaseHandoverFiles() {
	s.rx.mu.Lock()
	fs := s.rx.files
	s.rx.files = nil
	s.rx.mu.Unlock()
	for _, f := range fs {
		_ = f.Close()
	}
}

// dupRaw returns a close-on-exec duplicate of a unix socket's fd as a
// file, without touching the socket's blocking mode (no Fd call).
func dupRaw(c any) (*os.File, error) {
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
	nfd := -1
	cerr := rc.Control(func(fd uintptr) {
		nfd, err = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	})
	if cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(nfd), "handover"), nil
}

// handoverState maps the daemon onto handover.State (docs/upgrade.md
// "The state"): listener, pid file, connections, configuration, and the
// lease manager's lockspaces, tokens and orphans.
func (s *Server) handoverState() (handover.Snapshot, error) {
	var files []*os.File
	keep := func(f *os.File) int {
		files = append(files, f)
		s.rx.mu.Lock()
		s.rx.files = append(s.rx.files, f)
		s.rx.mu.Unlock()
		return len(files) - 1
	}
	st := &handover.State{
		OldPid: os.Getpid(), OldVersion: Version, BootID: handover.BootID(),
		TakenMono: handover.MonoNow(), TakenWall: time.Now().UnixNano(),
		PidFile: handover.PidFile{FD: -1},
	}
	cfg := &s.cfg
	st.Config = handover.Config{
		Args: append([]string(nil), os.Args[1:]...), RunDir: cfg.RunDir, SocketPath: s.SockPath(),
		PidFile: pidFilePath(cfg.RunDir), UID: cfg.UID, GID: cfg.GID,
		UseWatchdog: cfg.UseWatchdog, HostName: s.hostName,
	}
	lf, err := dupRaw(s.ln)
	if err != nil {
		return handover.Snapshot{}, fmt.Errorf("listener: %w", err)
	}
	st.Listener = handover.Listener{FD: keep(lf), Path: s.SockPath()}
	if s.lockf != nil {
		pf, err := dupFileCloexec(s.lockf)
		if err != nil {
			return handover.Snapshot{}, fmt.Errorf("pid file: %w", err)
		}
		st.PidFile = handover.PidFile{FD: keep(pf), Path: pidFilePath(cfg.RunDir)}
	}
	index := map[manager.ClientID]int{}
	for _, c := range s.clients() {
		s.rx.mu.Lock()
		detached := c.rd.detached
		s.rx.mu.Unlock()
		if detached {
			continue
		}
		if _, held := s.reading(c); held && s.inSlot(c) {
			return handover.Snapshot{}, fmt.Errorf("%w: connection ci %d is held by its command (event listener or shutdown_wait)",
				errNotHandedOver, c.slot)
		}
		if _, held := s.reading(c); held {
			continue // it ended after our list was taken: going away
		}
		c.mu.Lock()
		listener := c.evListener
		c.mu.Unlock()
		if listener {
			continue // handed over with its lockspace (manager.HandoverState)
		}
		uc, ok := c.uc.(*net.UnixConn)
		if !ok {
			return handover.Snapshot{}, fmt.Errorf("connection ci %d is not a unix socket", c.slot)
		}
		f, err := dupRaw(uc)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				continue // going away
			}
			return handover.Snapshot{}, fmt.Errorf("connection ci %d: %w", c.slot, err)
		}
		pid, uid, gid, err := handover.PeerCred(f)
		if err != nil {
			return handover.Snapshot{}, fmt.Errorf("connection ci %d: %w", c.slot, err)
		}
		c.mu.Lock()
		cl := handover.Client{
			FD: keep(f), Slot: c.slot, PeerPid: pid, PeerUID: uid, PeerGID: gid,
			Registered: c.registered, Pid: c.pid, Name: c.name, Restrict: c.restricted, Flags: c.flags,
			KillPath: c.killPath, KillArgs: c.killArgs, PidDead: c.pidDead, KillCount: c.killCount,
		}
		c.mu.Unlock()
		index[c.id] = len(st.Clients)
		st.Clients = append(st.Clients, cl)
	}
	if mg := s.deps.Manager; mg != nil {
		st.Lockspaces, st.Tokens, st.Orphans, err = mg.HandoverState(func(id manager.ClientID) (int, bool) {
			i, ok := index[id]
			return i, ok
		}, keep)
		if err != nil {
			return handover.Snapshot{}, err
		}
	}
	st.NumFDs = len(files)
	return handover.Snapshot{State: st, Files: files}, nil
}

func pidFilePath(runDir string) string { return filepath.Join(runDir, PidFileName) }

func dupFileCloexec(f *os.File) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	nfd := -1
	if cerr := rc.Control(func(fd uintptr) { nfd, err = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(nfd), f.Name()), nil
}

// Reexec hands the daemon over to the binary at path (docs/upgrade.md).
// On success the new image serves and the caller must exit at once
// without any cleanup (ExitAfterHandover); on failure the error is a
// *handover.Error and this daemon serves on with everything as it was.
func (s *Server) Reexec(ctx context.Context, path string) (*handover.Result, error) {
	if path == "" {
		path = s.exePath()
	}
	spec := handover.Spec{Path: path, Args: reexecArgs(), Stdout: os.Stdout, Stderr: os.Stderr}
	// GOSANLOCK_HANDOVER_WRITE_FORMAT=N writes the state in an older
	// format N, as the previous release did (docs/upgrade.md "Upgrading
	// from the previous release"; for tests). Out of range: the handover
	// fails at start and this daemon serves on.
	if v := os.Getenv("GOSANLOCK_HANDOVER_WRITE_FORMAT"); v != "" {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n < uint64(handover.MinFormatVersion) || n > uint64(handover.FormatVersion) {
			return nil, &handover.Error{Path: path, Stage: handover.StageStart, Err: fmt.Errorf("GOSANLOCK_HANDOVER_WRITE_FORMAT=%q: not a format in %d..%d",
				v, handover.MinFormatVersion, handover.FormatVersion)}
		}
		spec.WriteFormat = uint32(n)
	}
	format := handover.FormatVersion
	if spec.WriteFormat != 0 {
		format = spec.WriteFormat
	}
	s.lg.Warn(fmt.Sprintf("reexec %s format %d", path, format))
	res, err := handover.Handover(ctx, spec, s)
	s.releaseHandoverFiles()
	if err != nil {
		s.lg.Error("reexec failed: " + err.Error())
		return nil, err
	}
	s.lg.Warn(fmt.Sprintf("reexec done: pid %d serves", res.Pid), zap.Int("pid", res.Pid))
	return res, nil
}

// exePath is the binary a reexec without a path starts: this daemon's
// own, re-read from disk.
func (s *Server) exePath() string {
	if startExe != "" {
		return startExe
	}
	return "/proc/self/exe"
}

// reexecArgs is the new image's command line: this daemon's (a test
// running the daemon in-process replaces it).
var reexecArgs = func() []string { return os.Args }

// startExe is the daemon's binary resolved when the process started (a
// later os.Executable names a replaced file "... (deleted)").
var startExe, _ = os.Executable()

// reexecAndExit is a reexec whose success ends this process (SIGUSR1,
// `sanlock client reexec`); on failure it returns the error and this
// daemon serves on.
func (s *Server) reexecAndExit(path string) error {
	res, err := s.Reexec(s.ctx, path)
	if err != nil {
		return err
	}
	exitAfterHandover(res)
	return nil
}

// cmdReexec is `sanlock client reexec [-e PATH]` (CmdReexec): the answer
// comes only after the handover: 0, and then this image exits; or the
// error, with its text in one record, and this image serves on. Only
// root or the daemon's own uid may ask.
func cmdReexec(ctx context.Context, c *Conn, q *wire.Request) error {
	s := c.srv
	reply := func(rv int32, why string) error {
		h := q.Header
		h.Version, h.Length, h.Data, h.Data2 = wire.ProtoVersion, wire.HeaderSize, uint32(rv), 0
		b := h.Bytes()
		if why != "" {
			rec := wire.StateRecord{State: wire.State{Type: wire.StateDaemon}, Text: why}
			var err error
			if b, err = rec.AppendBinary(b); err != nil {
				return err
			}
		}
		return c.write(b)
	}
	if uc, ok := c.uc.(*net.UnixConn); ok {
		f, err := dupRaw(uc)
		if err == nil {
			_, uid, _, perr := handover.PeerCred(f)
			_ = f.Close()
			if perr == nil && uid != 0 && int(uid) != os.Getuid() {
				return reply(rescode.RvEPERM, "reexec: permission denied")
			}
		}
	}
	path := ""
	if q.Disk != nil {
		path = q.Disk.Path
	}
	// This connection waits for the answer: it is neither in flight nor
	// handed over.
	c.rd.detach()
	res, err := s.Reexec(ctx, path)
	if err != nil {
		return reply(rescode.RvEAGAIN, err.Error())
	}
	_ = reply(0, "")
	exitAfterHandover(res)
	return nil
}

// detach takes a reader out of the quiesce accounting for good: its
// connection is answered by this image and then closed.
func (r *connReader) detach() {
	r.end()
	g := &r.c.srv.rx
	g.mu.Lock()
	r.detached = true
	g.mu.Unlock()
}

// HandoverFile returns a close-on-exec duplicate of an event listener's
// connection for the handover state (manager.HandoverState).
func (c *Conn) HandoverFile() (*os.File, error) {
	uc, ok := c.uc.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("connection fd %d is not a unix socket", c.fd)
	}
	return dupRaw(uc)
}

// inSlot reports whether c still has its slot (a connection that ended
// frees its slot before its reader counts as ended).
func (s *Server) inSlot(c *Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return c.slot < len(s.slots) && s.slots[c.slot] == c
}
