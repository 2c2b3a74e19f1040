package handover

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Snapshot is a state and the fd table its FD fields index. The files
// stay owned by the caller: Handover duplicates what it passes on and
// never closes or changes the caller's files.
type Snapshot struct {
	State *State
	Files []*os.File
}

// Source is the serving daemon as Handover sees it.
type Source interface {
	// Snapshot returns the state while the daemon keeps serving. The new
	// image validates it before anything stops; its fds are inherited by
	// the new image at start.
	Snapshot() (Snapshot, error)
	// Quiesce stops serving: no accept, no read from any client, no
	// request in flight, no disk write (the renewal threads stop after a
	// renewal in progress completes; their last renewal goes into the
	// state). It keeps every fd, lease and wdmd session as it is: nothing
	// is closed, released or deactivated. It returns the final state,
	// which replaces the snapshot; its Files may include fds the snapshot
	// did not have (connections accepted since) and omit some it had. A
	// daemon that cannot quiesce promptly (a command that waits, a
	// lockspace being added) returns an error: the handover fails and
	// Resume is called.
	Quiesce() (Snapshot, error)
	// Resume serves again after a failed handover, with everything as it
	// was. It is called once after every Quiesce call that did not lead
	// to a handover, even one that returned an error.
	Resume()
}

// Spec is the new image to start.
type Spec struct {
	Path string   // the binary (required)
	Args []string // argv including argv[0] (default: {Path})
	Env  []string // environment (default: os.Environ()); EnvVar is added

	// Stdout and Stderr of the new image (nil: /dev/null). Use real
	// files: the new image outlives the old one, so a pipe read by the
	// old image would break.
	Stdout, Stderr *os.File
	// SysProcAttr for the start (nil: a new session, so the new image
	// survives the old one's process group).
	SysProcAttr *syscall.SysProcAttr

	// ReadyTimeout bounds the start until READY (default 10 s);
	// TakeoverTimeout bounds COMMIT until TOOK_OVER (default 5 s).
	ReadyTimeout    time.Duration
	TakeoverTimeout time.Duration

	// WriteFormat is the format version to write (0: FormatVersion). An
	// older version in MinFormatVersion..FormatVersion plays a previous
	// release's old image (docs/upgrade.md "Upgrading from the previous
	// release"): the state is encoded as it is with that version number,
	// which is that release's payload only when the state has nothing
	// the later formats added.
	WriteFormat uint32

	// test hooks: the format version written, and a mutation of the
	// snapshot blob after encoding.
	formatVersion uint32
	mangle        func([]byte)
}

// Result describes a completed handover. The old image must then exit
// without touching what it handed over: no close of a lease, no
// deactivation of a wdmd session, no unlink of the socket or pid file,
// no shutdown(2) of a connection. Closing its own fds is harmless, except
// a net.UnixListener's Close, which unlinks the socket path unless
// SetUnlinkOnClose(false) was called: simplest is to exit without
// closing anything.
type Result struct {
	Pid int // the new image's pid, which now serves
}

// Stage names how far a failed handover got.
type Stage string

// Stages of a failed handover.
const (
	StageSnapshot Stage = "snapshot" // the daemon could not produce its state
	StageStart    Stage = "start"    // the new image could not be started
	StageReady    Stage = "ready"    // the new image failed before READY
	StageQuiesce  Stage = "quiesce"  // the daemon could not quiesce
	StageCommit   Stage = "commit"   // failed between COMMIT and TOOK_OVER
)

// Error is a failed handover. The old image serves on with everything
// intact (Quiesce, if it was called, has been undone by Resume) and the
// new image has been killed and reaped: it cannot have acted.
type Error struct {
	Path   string
	Stage  Stage
	Err    error  // why
	Status string // how the new image ended ("" if never started)
}

func (e *Error) Error() string {
	s := fmt.Sprintf("handover to %s failed at %s: %v", e.Path, e.Stage, e.Err)
	if e.Status != "" {
		s += " (new image: " + e.Status + ")"
	}
	return s + "; the old image keeps serving"
}

func (e *Error) Unwrap() error { return e.Err }

// ErrRejected wraps the reason the new image gave in an ERROR message.
var ErrRejected = errors.New("new image rejected the handover")

// ErrBusy is a handover asked for while another one runs (a SIGUSR1 and
// a reexec command at once).
var ErrBusy = errors.New("another handover is in progress")

// running serialises handovers in this process.
var running sync.Mutex

// ErrTimeout is a step of the handover that took too long.
var ErrTimeout = errors.New("timed out")

// Handover starts spec.Path and hands src over to it (docs/upgrade.md
// "Protocol"). On success the new image serves and the caller must exit
// as Result says. On failure the error is an *Error and the caller keeps
// serving.
func Handover(ctx context.Context, spec Spec, src Source) (*Result, error) {
	if !running.TryLock() {
		return nil, &Error{Path: spec.Path, Stage: StageSnapshot, Err: ErrBusy}
	}
	defer running.Unlock()
	h := &oldSide{spec: spec, src: src}
	if h.spec.ReadyTimeout <= 0 {
		h.spec.ReadyTimeout = 10 * time.Second
	}
	if h.spec.TakeoverTimeout <= 0 {
		h.spec.TakeoverTimeout = 5 * time.Second
	}
	if h.spec.formatVersion == 0 {
		h.spec.formatVersion = h.spec.WriteFormat
	}
	if h.spec.formatVersion == 0 {
		h.spec.formatVersion = FormatVersion
	}
	defer h.cleanup()
	res, err := h.run(ctx)
	if err != nil {
		e := &Error{Path: spec.Path, Stage: h.stage, Err: err}
		e.Status = h.abort(err)
		if h.quiesced {
			src.Resume()
		}
		return nil, e
	}
	return res, nil
}

type oldSide struct {
	spec Spec
	src  Source

	stage    Stage
	quiesced bool

	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd.Wait returned
	ctl    *ctlConn

	initial   []*os.File // our dups of the snapshot fds, as the new image has them
	initialID map[fileID]int
	toClose   []*os.File
}

func (h *oldSide) cleanup() {
	for _, f := range h.initial {
		f.Close()
	}
	for _, f := range h.toClose {
		f.Close()
	}
	// The control socket stays open until the new image is gone or has
	// been told GO: closing it earlier would read as EOF there.
	if h.ctl != nil {
		h.ctl.Close()
	}
}

// abort ends a failed handover: the new image is told, killed and reaped,
// so that it cannot act once this returns. It returns how it ended.
func (h *oldSide) abort(why error) string {
	if h.cmd == nil || h.cmd.Process == nil {
		return ""
	}
	if h.ctl != nil {
		_ = h.ctl.send(msgAbort, []byte(truncate(why.Error(), maxMsgBody)), nil)
	}
	_ = h.cmd.Process.Signal(syscall.SIGKILL)
	<-h.exited
	return h.cmd.ProcessState.String()
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func (h *oldSide) run(ctx context.Context) (*Result, error) {
	h.stage = StageSnapshot
	snap, err := h.src.Snapshot()
	if err != nil {
		return nil, err
	}
	blob, err := h.encode(snap)
	if err != nil {
		return nil, err
	}
	if h.spec.mangle != nil {
		h.spec.mangle(blob)
	}
	digest := sha256.Sum256(blob)

	h.stage = StageStart
	if err := h.start(snap.Files, blob); err != nil {
		return nil, err
	}

	h.stage = StageReady
	m, err := h.await(ctx, h.spec.ReadyTimeout, msgReady)
	if err != nil {
		return nil, err
	}
	r, err := decodeReady(m.body)
	if err != nil {
		return nil, err
	}
	if r.proto != ProtocolVersion {
		return nil, fmt.Errorf("%w: new image speaks control protocol %d, this one %d", errGarbage, r.proto, ProtocolVersion)
	}
	if r.digest != digest {
		return nil, fmt.Errorf("%w: READY for a state with sha256 %x, sent %x", errGarbage, r.digest[:8], digest[:8])
	}
	if h.spec.formatVersion < r.minFmt || h.spec.formatVersion > r.maxFmt {
		return nil, fmt.Errorf("%w: new image reads formats %d..%d, not %d", ErrRejected, r.minFmt, r.maxFmt, h.spec.formatVersion)
	}

	h.stage = StageQuiesce
	h.quiesced = true
	final, err := h.src.Quiesce()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	newFiles, blob, err := h.finalBlob(final)
	if err != nil {
		return nil, err
	}

	h.stage = StageCommit
	if err := h.commit(newFiles, blob); err != nil {
		return nil, err
	}
	if _, err := h.await(ctx, h.spec.TakeoverTimeout, msgTookOver); err != nil {
		return nil, err
	}
	// From GO on the new image acts. If this send fails the new image
	// still acts when it sees the control socket close as this process
	// exits; either way the caller must now stop for good.
	_ = h.ctl.send(msgGo, nil, nil)
	return &Result{Pid: h.cmd.Process.Pid}, nil
}

func (h *oldSide) encode(snap Snapshot) ([]byte, error) {
	if snap.State == nil {
		return nil, errors.New("no state")
	}
	if snap.State.NumFDs != len(snap.Files) {
		return nil, fmt.Errorf("state says %d fds, snapshot has %d files", snap.State.NumFDs, len(snap.Files))
	}
	return encodeVersion(snap.State, h.spec.formatVersion)
}

func (h *oldSide) start(files []*os.File, blob []byte) error {
	h.initialID = make(map[fileID]int, len(files))
	for i, f := range files {
		if f == nil {
			return fmt.Errorf("snapshot file %d is nil", i)
		}
		fd, err := dupFile(f)
		if err != nil {
			return fmt.Errorf("dup snapshot fd %d: %w", i, err)
		}
		d := os.NewFile(uintptr(fd), f.Name())
		h.initial = append(h.initial, d)
		id, err := identify(fd)
		if err != nil {
			return fmt.Errorf("fstat snapshot fd %d: %w", i, err)
		}
		if j, dup := h.initialID[id]; dup {
			return fmt.Errorf("snapshot files %d and %d are the same file", j, i)
		}
		h.initialID[id] = i
	}
	mem, err := memfdBlob(blob)
	if err != nil {
		return err
	}
	h.toClose = append(h.toClose, mem)
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socketpair: %w", err)
	}
	theirs := os.NewFile(uintptr(pair[1]), "handover-control")
	h.toClose = append(h.toClose, theirs)
	ours := os.NewFile(uintptr(pair[0]), "handover-control")
	h.ctl, err = newCtlConn(ours)
	ours.Close()
	if err != nil {
		return err
	}

	// The child gets fd 3 = control, 4 = state, 5.. = the fd table. The
	// fds are close-on-exec here and become inheritable only in the child
	// (os/exec dup2s them after fork), so a concurrent fork of the daemon
	// cannot leak them.
	e := env{ctl: 3, state: 4, fd0: 5, nfd: len(files)}
	cmd := &exec.Cmd{
		Path:        h.spec.Path,
		Args:        h.spec.Args,
		Env:         h.spec.Env,
		Stdout:      h.spec.Stdout,
		Stderr:      h.spec.Stderr,
		ExtraFiles:  append([]*os.File{theirs, mem}, h.initial...),
		SysProcAttr: h.spec.SysProcAttr,
	}
	if len(cmd.Args) == 0 {
		cmd.Args = []string{h.spec.Path}
	}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(withoutEnv(cmd.Env, EnvVar), EnvVar+"="+e.String())
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	h.cmd = cmd
	h.exited = make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(h.exited)
	}()
	// The child has its copies now; ours would only keep the control
	// socket open after the child died.
	theirs.Close()
	mem.Close()
	h.toClose = nil
	return nil
}

// dupFile returns a close-on-exec duplicate of f's fd. It does not use
// f.Fd(), which would put a socket from net's File methods (shared with
// the daemon's own connection) into blocking mode.
func dupFile(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	nfd := -1
	var derr error
	if err := rc.Control(func(fd uintptr) {
		nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return -1, err
	}
	return nfd, derr
}

func withoutEnv(envs []string, key string) []string {
	out := make([]string, 0, len(envs)+1)
	for _, kv := range envs {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// A timeoutError says whether it is a timeout: the control channel's
// deadline (os.ErrDeadlineExceeded) or an errno such as EAGAIN.
type timeoutError interface{ Timeout() bool }

var _ timeoutError = syscall.Errno(0)

// await waits for a message of type want. An ERROR, another type, EOF, the
// new image's exit, the context or the timeout end the wait with an error.
func (h *oldSide) await(ctx context.Context, timeout time.Duration, want uint32) (*message, error) {
	m, err := h.ctl.recv(ctx, time.Now().Add(timeout))
	if err != nil {
		var ne timeoutError
		switch {
		case ctx.Err() != nil:
			return nil, err
		case errors.As(err, &ne) && ne.Timeout():
			return nil, fmt.Errorf("%w after %v waiting for %s", ErrTimeout, timeout, msgName(want))
		case errors.Is(err, errEOF):
			return nil, fmt.Errorf("new image closed the control channel before %s", msgName(want))
		}
		return nil, err
	}
	closeFDs(m.fds) // the new image never sends fds
	switch m.typ {
	case want:
		return m, nil
	case msgError:
		return nil, fmt.Errorf("%w: %s", ErrRejected, printable(m.body))
	}
	return nil, fmt.Errorf("%w: %s while waiting for %s", errGarbage, msgName(m.typ), msgName(want))
}

// finalBlob maps the final snapshot onto the inherited fd table plus the
// fds it adds, and encodes it.
func (h *oldSide) finalBlob(final Snapshot) ([]int, []byte, error) {
	if final.State == nil {
		return nil, nil, errors.New("quiesce returned no state")
	}
	if final.State.NumFDs != len(final.Files) {
		return nil, nil, fmt.Errorf("final state says %d fds, quiesce returned %d files", final.State.NumFDs, len(final.Files))
	}
	s := *final.State // shallow; fd fields are rewritten on deep copies below
	s.Clients = append([]Client(nil), s.Clients...)
	s.Lockspaces = append([]Lockspace(nil), s.Lockspaces...)
	for i := range s.Lockspaces {
		if w := s.Lockspaces[i].Wdmd; w != nil {
			c := *w
			s.Lockspaces[i].Wdmd = &c
		}
	}
	n := len(h.initial)
	table := make([]int, len(final.Files))
	var added []int
	for i, f := range final.Files {
		if f == nil {
			return nil, nil, fmt.Errorf("final file %d is nil", i)
		}
		fd, err := dupFile(f)
		if err != nil {
			return nil, nil, fmt.Errorf("dup final fd %d: %w", i, err)
		}
		h.toClose = append(h.toClose, os.NewFile(uintptr(fd), f.Name()))
		id, err := identify(fd)
		if err != nil {
			return nil, nil, fmt.Errorf("fstat final fd %d: %w", i, err)
		}
		if j, ok := h.initialID[id]; ok {
			table[i] = j
			continue
		}
		table[i] = n + len(added)
		added = append(added, fd)
	}
	for _, ref := range s.fdRefs() {
		if *ref < 0 || *ref >= len(table) {
			return nil, nil, fmt.Errorf("%w: fd index %d out of range [0,%d)", ErrInvalid, *ref, len(table))
		}
		*ref = table[*ref]
	}
	s.NumFDs = n + len(added)
	blob, err := encodeVersion(&s, h.spec.formatVersion)
	return added, blob, err
}

func (h *oldSide) commit(added []int, blob []byte) error {
	for i := 0; i < len(added); i += maxFDsPerMsg {
		batch := added[i:min(i+maxFDsPerMsg, len(added))]
		if err := h.ctl.send(msgFDs, countBody(len(batch)), batch); err != nil {
			return err
		}
	}
	mem, err := memfdBlob(blob)
	if err != nil {
		return err
	}
	defer mem.Close()
	return h.ctl.send(msgCommit, commitBody(len(added), sha256.Sum256(blob)), []int{int(mem.Fd())})
}
