package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/handover"
	"github.com/gosanlock/gosanlock/handover/serving"
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// The old image's side of a handover (docs/upgrade.md): the Server is
// the handover.Source of a running daemon. Quiesce stops the accept loop and
// every connection reader at a message boundary and waits for the
// commands in flight; Resume undoes it.

// errNotHandedOver is a connection state the handover cannot carry yet.
var errNotHandedOver = errors.New("cannot be handed over yet")

// quiesceTimeout bounds the wait for readers and commands in flight
// when no lease I/O can be in flight, and the pause of the renewals.
const quiesceTimeout = 2 * time.Second

// ballotIOs is the number of I/O rounds an acquire may still issue after
// its first disk write, each ending by its io_timeout deadline: the
// ballot's two dblock writes and two reads, a leader read and the leader
// write, then at most four for its tail (the release of a ballot that
// failed half way, or a shared hold's dblock write and leader release,
// or the LVB read). docs/upgrade.md "Pending requests" argues it.
const ballotIOs = 10

// quiesceWait bounds the wait for the commands in flight: an acquire that
// has written is not cancelled, so the wait covers the rest of its ballot
// at the largest io_timeout (seconds) of the joined lockspaces, on one
// disk. A longer command makes the handover fail (the old image serves on).
func quiesceWait(maxIOTimeout int) time.Duration {
	return quiesceTimeout + ballotIOs*time.Duration(maxIOTimeout)*time.Second
}

// handoverFiles are the duplicates made for Snapshot and Quiesce, closed by
// releaseHandoverFiles.
type handoverFiles struct {
	mu      sync.Mutex
	adopted bool // this image took over from another (adopt.go)
	files   []*os.File
}

// A deadlineListener is a listener whose Accept a deadline interrupts:
// Quiesce stops the accept loop with one. The daemon's own listener, a
// *net.UnixListener, is one; a listener given to Serve need not be (its
// new connections still park before their first read).
type deadlineListener interface {
	net.Listener
	SetDeadline(time.Time) error
}

var _ deadlineListener = (*net.UnixListener)(nil)

// setAcceptDeadline sets the listener's accept deadline, if it has one.
func (s *Server) setAcceptDeadline(t time.Time) {
	if dl, ok := s.ln.(deadlineListener); ok {
		_ = dl.SetDeadline(t)
	}
}

// acceptTimedOut is the accept loop's check after an Accept error: a
// deadline set by Quiesce parks the loop until Resume.
func (s *Server) acceptTimedOut(err error) bool {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	s.gate.ParkAccept()
	s.setAcceptDeadline(time.Time{})
	return true
}

var _ handover.Source = (*Server)(nil)

// Snapshot implements handover.Source.
func (s *Server) Snapshot() (handover.Snapshot, error) { return s.handoverState() }

// Quiesce implements handover.Source.
func (s *Server) Quiesce() (handover.Snapshot, error) {
	s.gate.Quiesce()
	past := time.Unix(1, 0)
	s.setAcceptDeadline(past)
	for _, c := range s.clients() {
		// Only readers: a held connection (event listener) polls itself
		// and would take a deadline for its end. A reader that starts
		// later parks before its first read.
		if r, _ := s.gate.Reading(&c.rd); r {
			_ = c.uc.SetReadDeadline(past)
		}
	}
	// Restartable commands in flight are cancelled: they run again in
	// the next image (pending.go).
	for _, c := range s.clients() {
		c.cancelPending()
	}
	wait := quiesceTimeout
	if mg := s.mgr; mg != nil {
		wait = quiesceWait(mg.Lockspaces.MaxIOTimeout())
	}
	if err := s.gate.Wait(wait); err != nil {
		return handover.Snapshot{}, err
	}
	// No command runs now. Hold the renewals too: from here until Resume
	// (a failed handover) or our exit no lease is renewed or released by
	// this image (docs/upgrade.md "Adopting lockspaces").
	if mg := s.mgr; mg != nil {
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
	if mg := s.mgr; mg != nil {
		mg.ResumeRenewals()
	}
	s.gate.Resume()
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

// handoverState maps the daemon onto handover.State (docs/upgrade.md
// "The state"): configuration, listener, pid file, connections, and the
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
		Config: s.handoverConfig(),
	}
	var err error
	if st.Listener, st.PidFile, err = s.handoverSocketAndPidFile(keep); err != nil {
		return handover.Snapshot{}, err
	}
	index := map[manager.ClientID]int{}
	if st.Clients, err = s.handoverClients(keep, index); err != nil {
		return handover.Snapshot{}, err
	}
	if mg := s.mgr; mg != nil {
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

// handoverConfig is the configuration the new image serves with.
func (s *Server) handoverConfig() handover.Config {
	cfg := &s.cfg
	return handover.Config{
		Args: append([]string(nil), os.Args[1:]...), RunDir: cfg.RunDir, SocketPath: s.SockPath(),
		PidFile: pidFilePath(cfg.RunDir), UID: cfg.UID, GID: cfg.GID,
		UseWatchdog: cfg.UseWatchdog, HostName: s.hostName,
	}
}

// handoverSocketAndPidFile hands over the listening socket and the locked
// pid file (FD -1 when the daemon has none).
func (s *Server) handoverSocketAndPidFile(keep func(*os.File) int) (handover.Listener, handover.PidFile, error) {
	pid := handover.PidFile{FD: -1}
	lf, err := serving.DupSocket(s.ln)
	if err != nil {
		return handover.Listener{}, pid, fmt.Errorf("listener: %w", err)
	}
	ln := handover.Listener{FD: keep(lf), Path: s.SockPath()}
	if s.lockf != nil {
		pf, err := serving.DupFile(s.lockf)
		if err != nil {
			return ln, pid, fmt.Errorf("pid file: %w", err)
		}
		pid = handover.PidFile{FD: keep(pf), Path: pidFilePath(s.cfg.RunDir)}
	}
	return ln, pid, nil
}

// handoverClients hands over every client connection that is not going
// away and not an event listener (those go with their lockspace), and
// records in index each client's place in the list.
func (s *Server) handoverClients(keep func(*os.File) int, index map[manager.ClientID]int) ([]handover.Client, error) {
	var out []handover.Client
	for _, c := range s.clients() {
		if s.gate.Detached(&c.rd) {
			continue
		}
		if _, held := s.gate.Reading(&c.rd); held && s.inSlot(c) {
			return nil, fmt.Errorf("%w: connection ci %d is held by its command (event listener or shutdown_wait)",
				errNotHandedOver, c.slot)
		}
		if _, held := s.gate.Reading(&c.rd); held {
			continue // it ended after our list was taken: going away
		}
		c.mu.Lock()
		listener := c.evListener
		c.mu.Unlock()
		if listener {
			continue // handed over with its lockspace (manager.HandoverState)
		}
		cl, ok, err := s.handoverClient(c, keep)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue // going away
		}
		index[c.id] = len(out)
		out = append(out, cl)
	}
	return out, nil
}

// handoverClient maps one connection: a duplicate of its socket, its
// peer credentials, its client state and a request it has to run again.
// ok is false for a connection already closed.
func (s *Server) handoverClient(c *Conn, keep func(*os.File) int) (cl handover.Client, ok bool, err error) {
	uc, isUnix := c.uc.(*net.UnixConn)
	if !isUnix {
		return cl, false, fmt.Errorf("connection ci %d is not a unix socket", c.slot)
	}
	f, err := serving.DupSocket(uc)
	if err != nil {
		if errors.Is(err, net.ErrClosed) {
			return cl, false, nil
		}
		return cl, false, fmt.Errorf("connection ci %d: %w", c.slot, err)
	}
	pid, uid, gid, err := handover.PeerCred(f)
	if err != nil {
		_ = f.Close()
		return cl, false, fmt.Errorf("connection ci %d: %w", c.slot, err)
	}
	pending := s.gate.Redo(&c.rd)
	cs := c.clientStatus()
	return handover.Client{Pending: pending,
		FD: keep(f), Slot: c.slot, PeerPid: pid, PeerUID: uid, PeerGID: gid,
		Registered: cs.Registered, Pid: cs.Pid, Name: cs.Name, Restrict: cs.Restrict, Flags: cs.Flags,
		KillPath: cs.KillPath, KillArgs: cs.KillArgs, PidDead: cs.PidDead, KillCount: cs.KillCount,
	}, true, nil
}

func pidFilePath(runDir string) string { return filepath.Join(runDir, PidFileName) }

// Reexec hands the daemon over to a new image of its own binary, the
// file at the path it was started from (docs/upgrade.md): an upgrade
// installs the new binary there first. On success the new image serves
// and the caller must exit at once without any cleanup
// (ExitAfterHandover); on failure the error is a *handover.Error and this
// daemon serves on with everything as it was. No path a client sends is
// ever executed (docs/security.md "Re-exec").
func (s *Server) Reexec(ctx context.Context) (*handover.Result, error) {
	return s.reexecTo(ctx, s.exePath())
}

// reexecTo hands the daemon over to the binary at path, once checkImage
// accepts it.
func (s *Server) reexecTo(ctx context.Context, path string) (*handover.Result, error) {
	if err := serving.CheckImage(path); err != nil {
		s.lg.Error("reexec refused: " + err.Error())
		return nil, &handover.Error{Path: path, Stage: handover.StageStart, Err: err}
	}
	spec := handover.Spec{Path: path, Args: reexecArgs(), Stdout: os.Stdout, Stderr: os.Stderr}
	// An older format, as the previous release wrote (tests).
	wf, err := serving.WriteFormat(path)
	if err != nil {
		return nil, err
	}
	spec.WriteFormat = wf
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

// exePath is the binary a reexec starts: the path this daemon was
// started from, re-read from disk.
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

// reexecAndExit is a reexec whose success ends this process (SIGUSR1);
// on failure it returns the error and this daemon serves on.
func (s *Server) reexecAndExit() error {
	res, err := s.Reexec(s.ctx)
	if err != nil {
		return err
	}
	serving.ExitAfterHandover(res)
	return nil
}

// cmdReexec is `sanlock client reexec` (CmdReexec, a private command):
// the answer comes only after the handover: 0, and then this image
// exits; or the error, with its text in one record, and this image
// serves on. Only root or the daemon's own uid may ask, and only for a
// reexec of the daemon's own binary: the request carries nothing else.
func cmdReexec(ctx context.Context, c *Conn, q *wire.Request) error {
	s := c.srv
	reply := func(rv int32, why string) error {
		b, err := serving.Reply(q, rv, why)
		if err != nil {
			return err
		}
		return c.write(b)
	}
	if uc, ok := c.uc.(*net.UnixConn); ok && !serving.PeerMayReexec(uc) {
		return reply(rescode.RvEPERM, "reexec: permission denied")
	}
	// This connection waits for the answer: it is neither in flight nor
	// handed over.
	c.rd.Detach()
	res, err := s.Reexec(ctx)
	if err != nil {
		return reply(rescode.RvEAGAIN, err.Error())
	}
	_ = reply(0, "")
	serving.ExitAfterHandover(res)
	return nil
}

// HandoverFile returns a close-on-exec duplicate of an event listener's
// connection for the handover state (manager.HandoverState).
func (c *Conn) HandoverFile() (*os.File, error) {
	uc, ok := c.uc.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("connection fd %d is not a unix socket", c.fd)
	}
	return serving.DupSocket(uc)
}

// inSlot reports whether c still has its slot (a connection that ended
// frees its slot before its reader counts as ended).
func (s *Server) inSlot(c *Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return c.slot < len(s.slots) && s.slots[c.slot] == c
}
