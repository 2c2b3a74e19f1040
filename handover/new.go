package handover

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Inherited reports whether this process was started by Handover (the
// environment names a handover). The daemon checks it first thing in
// main, before it opens, binds or writes anything.
func Inherited() bool {
	_, ok := os.LookupEnv(EnvVar)
	return ok
}

// Taker is the new image's side of a handover. Its methods are called in
// order: Receive, then Ready, then TookOver; Fail at any point gives up.
// Until TookOver returns nil the new image must not act: no disk write,
// no read from a client, no accept, no wdmd message, no pid file.
type Taker struct {
	ctl     *ctlConn
	initial []*os.File // the inherited fd table
	snap    *State
	digest  [32]byte
	done    bool
}

// Adopted is the final state and the fd table it indexes. Files[i] is nil
// for an fd the state does not reference (it has been closed). The fds
// are close-on-exec.
type Adopted struct {
	State *State
	Files []*os.File
}

// Receive reads the handover named by the environment: it takes the
// control socket, the inherited fds and the snapshot state, and validates
// the state (docs/upgrade.md "Protocol"). It removes EnvVar from the
// environment and marks the inherited fds close-on-exec, so that nothing
// the daemon starts later inherits them. On error it has told the old
// image why (when it could) and the caller should exit.
func Receive() (*Taker, error) {
	val, ok := os.LookupEnv(EnvVar)
	if !ok {
		return nil, fmt.Errorf("%s not set: not started by a handover", EnvVar)
	}
	os.Unsetenv(EnvVar)
	e, err := parseEnv(val)
	if err != nil {
		return nil, err
	}
	unix.CloseOnExec(e.ctl)
	unix.CloseOnExec(e.state)
	t := &Taker{}
	ctlFile := os.NewFile(uintptr(e.ctl), "handover-control")
	t.ctl, err = newCtlConn(ctlFile)
	ctlFile.Close()
	if err != nil {
		unix.Close(e.state)
		return nil, err
	}
	for i := 0; i < e.nfd; i++ {
		fd := e.fd0 + i
		if fd == e.ctl || fd == e.state {
			return nil, t.fail(fmt.Errorf("%s: fd table overlaps the control or state fd", EnvVar))
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			return nil, t.fail(fmt.Errorf("inherited fd %d (table index %d): %w", fd, i, err))
		}
		unix.CloseOnExec(fd)
		t.initial = append(t.initial, os.NewFile(uintptr(fd), fmt.Sprintf("handover-fd-%d", i)))
	}
	blob, digest, err := readBlob(e.state)
	unix.Close(e.state)
	if err != nil {
		return nil, t.fail(err)
	}
	s, err := Decode(blob)
	if err != nil {
		return nil, t.fail(err)
	}
	if err := t.checkState(s, t.initial); err != nil {
		return nil, t.fail(err)
	}
	t.snap, t.digest = s, digest
	return t, nil
}

// Snapshot returns the state as it was when the new image was started.
// The new image may prepare from it (parse, allocate, compute) but the
// final state Ready returns replaces it.
func (t *Taker) Snapshot() *State { return t.snap }

// checkState checks what can only be checked here: the boot, the fd
// count, and that each fd is what the state says it is.
func (t *Taker) checkState(s *State, files []*os.File) error {
	if s.NumFDs != len(files) {
		return fmt.Errorf("%w: state refers to %d fds, received %d", ErrInvalid, s.NumFDs, len(files))
	}
	if id := bootID(); s.BootID != "" && id != "" && id != s.BootID {
		return fmt.Errorf("%w: state taken on boot %s, this is boot %s", ErrInvalid, s.BootID, id)
	}
	if err := checkListener(files[s.Listener.FD]); err != nil {
		return fmt.Errorf("%w: listener: %v", ErrInvalid, err)
	}
	if s.PidFile.FD != -1 {
		var st unix.Stat_t
		if err := withFD(files[s.PidFile.FD], func(fd int) error { return unix.Fstat(fd, &st) }); err != nil ||
			st.Mode&unix.S_IFMT != unix.S_IFREG {
			return fmt.Errorf("%w: pid file: not a regular file (%v)", ErrInvalid, err)
		}
	}
	for i := range s.Clients {
		c := &s.Clients[i]
		if err := checkClient(files[c.FD], c); err != nil {
			return fmt.Errorf("%w: client %d: %v", ErrInvalid, i, err)
		}
	}
	for i := range s.Lockspaces {
		if w := s.Lockspaces[i].Wdmd; w != nil {
			if err := checkStream(files[w.FD]); err != nil {
				return fmt.Errorf("%w: lockspace %q wdmd session: %v", ErrInvalid, s.Lockspaces[i].Name, err)
			}
		}
	}
	return nil
}

// fail tells the old image why this image gives up, releases everything
// received, and returns err.
func (t *Taker) fail(err error) error {
	if t.done {
		return err
	}
	t.done = true
	if t.ctl != nil {
		_ = t.ctl.send(msgError, []byte(truncate(err.Error(), maxMsgBody)), nil)
		t.ctl.Close()
	}
	for _, f := range t.initial {
		if f != nil {
			f.Close()
		}
	}
	return err
}

// Fail gives up the handover: the old image is told why and keeps
// serving. Use it when the new image cannot build its internals from the
// state. It returns err.
func (t *Taker) Fail(err error) error { return t.fail(err) }

// Ready tells the old image the snapshot is valid and waits until it has
// quiesced and committed the final state, which it returns after the
// same checks as the snapshot. An ABORT or the old image going away
// before COMMIT is an error; the caller then exits without acting.
func (t *Taker) Ready(ctx context.Context) (*Adopted, error) {
	if t.done {
		return nil, errors.New("handover already ended")
	}
	r := readyBody{proto: ProtocolVersion, minFmt: MinFormatVersion, maxFmt: FormatVersion, digest: t.digest}
	if err := t.ctl.send(msgReady, r.encode(), nil); err != nil {
		return nil, t.fail(err)
	}
	files := append([]*os.File(nil), t.initial...)
	var added int
	for {
		m, err := t.ctl.recv(ctx, time.Time{})
		if err != nil {
			return nil, t.fail(fmt.Errorf("waiting for COMMIT: %w", err))
		}
		switch m.typ {
		case msgFDs:
			if len(m.body) != 4 || int(le32(m.body)) != len(m.fds) || len(m.fds) == 0 ||
				added+len(m.fds) > MaxFDs {
				closeFDs(m.fds)
				closeFiles(files[len(t.initial):])
				return nil, t.fail(fmt.Errorf("%w: FDS with %d fds, body %x", errGarbage, len(m.fds), m.body))
			}
			for _, fd := range m.fds {
				files = append(files, os.NewFile(uintptr(fd), fmt.Sprintf("handover-fd-%d", len(files))))
			}
			added += len(m.fds)
			continue
		case msgCommit:
			ad, err := t.commit(m, files, added)
			if err != nil {
				closeFiles(files[len(t.initial):])
				return nil, t.fail(err)
			}
			return ad, nil
		case msgAbort:
			closeFDs(m.fds)
			closeFiles(files[len(t.initial):])
			return nil, t.fail(fmt.Errorf("old image aborted the handover: %s", printable(m.body)))
		}
		closeFDs(m.fds)
		closeFiles(files[len(t.initial):])
		return nil, t.fail(fmt.Errorf("%w: %s while waiting for COMMIT", errGarbage, msgName(m.typ)))
	}
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

func (t *Taker) commit(m *message, files []*os.File, added int) (*Adopted, error) {
	if len(m.fds) != 1 || len(m.body) != 36 {
		closeFDs(m.fds)
		return nil, fmt.Errorf("%w: COMMIT with %d fds and %d body bytes", errGarbage, len(m.fds), len(m.body))
	}
	blob, digest, err := readBlob(m.fds[0])
	unix.Close(m.fds[0])
	if err != nil {
		return nil, err
	}
	if int(le32(m.body)) != added {
		return nil, fmt.Errorf("%w: COMMIT announces %d new fds, received %d", errGarbage, le32(m.body), added)
	}
	if [32]byte(m.body[4:36]) != digest {
		return nil, fmt.Errorf("%w: final state sha256 %x, COMMIT says %x", ErrChecksum, digest[:8], m.body[4:12])
	}
	s, err := Decode(blob)
	if err != nil {
		return nil, err
	}
	if err := t.checkState(s, files); err != nil {
		return nil, err
	}
	// Keep what the state references, close the rest.
	used := make([]bool, len(files))
	for _, ref := range s.fdRefs() {
		used[*ref] = true
	}
	out := make([]*os.File, len(files))
	for i, f := range files {
		if used[i] {
			out[i] = f
		} else {
			f.Close()
		}
	}
	t.initial = nil // owned by the Adopted now
	return &Adopted{State: s, Files: out}, nil
}

// TookOver tells the old image the final state is adopted and waits for
// its GO (or for it to go away: after COMMIT the old image only ever
// kills this one or exits). When it returns nil the new image serves:
// from then on it acts. On error the new image must exit without acting.
func (t *Taker) TookOver(ctx context.Context) error {
	if t.done {
		return errors.New("handover already ended")
	}
	var m *message
	err := t.ctl.send(msgTookOver, nil, nil)
	if err == nil {
		m, err = t.ctl.recv(ctx, time.Time{})
	} else if errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET) {
		err = errEOF
	}
	switch {
	case err == nil && m.typ == msgGo:
	case errors.Is(err, errEOF):
		// The old image exited after COMMIT: it no longer serves.
	case err != nil:
		return t.fail(fmt.Errorf("waiting for GO: %w", err))
	default:
		closeFDs(m.fds)
		return t.fail(fmt.Errorf("%w: %s while waiting for GO", errGarbage, msgName(m.typ)))
	}
	t.done = true
	t.ctl.Close()
	return nil
}

func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil || len(b) < 2 {
		return ""
	}
	return string(b[:len(b)-1])
}

// BootID returns this boot's id for State.BootID ("" if unknown).
func BootID() string { return bootID() }

// MonoNow returns CLOCK_MONOTONIC in ns, for State.TakenMono: unlike Go's
// monotonic readings it means the same in every process of a boot.
func MonoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}

// Since returns how long ago (CLOCK_MONOTONIC) the state was taken.
func (s *State) Since() time.Duration { return time.Duration(MonoNow() - s.TakenMono) }

// withFD runs fn on f's fd without f.Fd() (see dupFile).
func withFD(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

func sockType(f *os.File) (domain, typ int, err error) {
	err = withFD(f, func(fd int) error {
		var err error
		if typ, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE); err != nil {
			return fmt.Errorf("not a socket: %w", err)
		}
		domain, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
		return err
	})
	return domain, typ, err
}

func checkStream(f *os.File) error {
	d, typ, err := sockType(f)
	if err != nil {
		return err
	}
	if d != unix.AF_UNIX || typ != unix.SOCK_STREAM {
		return fmt.Errorf("socket domain %d type %d, want a unix stream socket", d, typ)
	}
	return nil
}

func checkListener(f *os.File) error {
	if err := checkStream(f); err != nil {
		return err
	}
	var acc int
	err := withFD(f, func(fd int) error {
		var err error
		acc, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
		return err
	})
	if err != nil || acc != 1 {
		return fmt.Errorf("not listening (%v)", err)
	}
	return nil
}

func checkClient(f *os.File, c *Client) error {
	if err := checkStream(f); err != nil {
		return err
	}
	pid, uid, gid, err := PeerCred(f)
	if err != nil {
		return err
	}
	if pid != c.PeerPid || uid != c.PeerUID || gid != c.PeerGID {
		return fmt.Errorf("SO_PEERCRED pid %d uid %d gid %d, state says pid %d uid %d gid %d",
			pid, uid, gid, c.PeerPid, c.PeerUID, c.PeerGID)
	}
	return nil
}

// PeerCred returns SO_PEERCRED of a connected unix socket, for
// Client.PeerPid/PeerUID/PeerGID.
func PeerCred(f *os.File) (pid int32, uid, gid uint32, err error) {
	var cr *unix.Ucred
	err = withFD(f, func(fd int) error {
		var err error
		cr, err = unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
		return err
	})
	if err != nil {
		return 0, 0, 0, fmt.Errorf("SO_PEERCRED: %w", err)
	}
	return cr.Pid, cr.Uid, cr.Gid, nil
}
