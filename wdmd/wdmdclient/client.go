// Package wdmdclient is the client side of the wdmd socket protocol: what
// libwdmd gives the C sanlock daemon (connect, register, refcount set and
// clear, test_live, status) plus the dump request, and Session, the
// sequence the sanlock daemon runs per lockspace (docs/wdmd.md "Client protocol", "sanlock side").
// It talks to our wdmd and to wdmd 3.8.5 alike.
package wdmdclient

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/gosanlock/gosanlock/wdmd"
)

// DefaultSocket is the fixed path of wdmd's socket.
const DefaultSocket = "/run/wdmd/wdmd.sock"

// DefaultTimeout bounds each send and each reply wait.
const DefaultTimeout = 10 * time.Second

// Conn is one connection to wdmd.
type Conn struct {
	c       *net.UnixConn
	Timeout time.Duration // per call; 0 means DefaultTimeout
	pend    []byte        // start of a record cut by a read deadline
}

// Connect connects to the wdmd socket at path ("" means DefaultSocket).
func Connect(path string) (*Conn, error) {
	if path == "" {
		path = DefaultSocket
	}
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("wdmd connect: %w", err)
	}
	return &Conn{c: c}, nil
}

func (c *Conn) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

func (c *Conn) send(r *wdmd.Record) error {
	_ = c.c.SetWriteDeadline(time.Now().Add(c.timeout()))
	if _, err := c.c.Write(r.Marshal()); err != nil {
		return fmt.Errorf("wdmd send cmd %d: %w", r.Cmd, err)
	}
	return nil
}

// Register names the connection; wdmd records the caller's pid. The name
// may have at most 128 bytes.
func (c *Conn) Register(name string) error {
	r := wdmd.Record{Cmd: wdmd.CmdRegister}
	if err := r.SetName(name); err != nil {
		return err
	}
	return c.send(&r)
}

// RefcountSet keeps wdmd from quitting while this connection exists.
func (c *Conn) RefcountSet() error { return c.send(&wdmd.Record{Cmd: wdmd.CmdRefcountSet}) }

// RefcountClear undoes RefcountSet.
func (c *Conn) RefcountClear() error { return c.send(&wdmd.Record{Cmd: wdmd.CmdRefcountClear}) }

// TestLive sets this connection's renewal time and expiry (monotonic
// seconds). wdmd stops pinging the device from expire-10 on; expire 0
// removes the expiry.
func (c *Conn) TestLive(renewal, expire uint64) error {
	return c.send(&wdmd.Record{Cmd: wdmd.CmdTestLive, RenewalTime: renewal, ExpireTime: expire})
}

// Status is wdmd's answer to STATUS.
type Status struct {
	TestInterval  int    // seconds between tests now (10, or 1 while failing)
	FireTimeout   int    // the device timeout (60)
	LastKeepalive uint64 // monotonic seconds of the last ping
}

// Status asks wdmd for its test interval, fire timeout and last ping.
// A late answer to OpenWatchdog that arrives first is skipped (see
// Session.Activate, which reads it).
func (c *Conn) Status() (Status, error) {
	st, _, err := c.status()
	return st, err
}

// status sends STATUS and reads records until its answer; an answer to
// an earlier OPEN_WATCHDOG met on the way is returned as open (-1: none).
func (c *Conn) status() (st Status, open int, err error) {
	open = -1
	if err := c.send(&wdmd.Record{Cmd: wdmd.CmdStatus}); err != nil {
		return Status{}, open, err
	}
	for {
		r, err := c.recv()
		if err != nil {
			return Status{}, open, fmt.Errorf("wdmd status reply: %w", err)
		}
		if r.Cmd == wdmd.CmdOpenWatchdog {
			open = int(r.FireTimeout)
			continue
		}
		return Status{TestInterval: int(r.TestInterval), FireTimeout: int(r.FireTimeout), LastKeepalive: r.LastKeepalive}, open, nil
	}
}

// recv reads one record within the call timeout.
func (c *Conn) recv() (wdmd.Record, error) {
	return c.recvWithin(c.timeout())
}

// recvWithin reads one record, waiting up to d. Bytes of a record cut by
// the deadline are kept for the next read, so records stay aligned.
func (c *Conn) recvWithin(d time.Duration) (wdmd.Record, error) {
	_ = c.c.SetReadDeadline(time.Now().Add(d))
	var r wdmd.Record
	buf := make([]byte, wdmd.RecordSize)
	for len(c.pend) < wdmd.RecordSize {
		n, err := c.c.Read(buf[:wdmd.RecordSize-len(c.pend)])
		c.pend = append(c.pend, buf[:n]...)
		if err != nil && len(c.pend) < wdmd.RecordSize {
			return r, err
		}
	}
	_ = r.Unmarshal(c.pend)
	c.pend = c.pend[:0]
	return r, nil
}

// ErrNoAnswer is returned by OpenWatchdog when wdmd did not answer
// within the wait: wdmd 3.8.5 ignores the command and never answers.
var ErrNoAnswer = errors.New("wdmd did not answer open_watchdog")

// OpenWatchdog sends OPEN_WATCHDOG (command 7, wdmd 3.9 and later) asking
// for the device to be armed with fire seconds, and waits up to wait for
// the answer: the fire timeout in force, 0 if the device could not be
// opened. ErrNoAnswer means no answer came in time (wdmd 3.8.5 never
// answers; its device is armed from its start); the connection stays
// usable, and a late answer is read by Status.
func (c *Conn) OpenWatchdog(fire int, wait time.Duration) (int, error) {
	if err := c.send(&wdmd.Record{Cmd: wdmd.CmdOpenWatchdog, FireTimeout: uint32(fire)}); err != nil {
		return 0, err
	}
	r, err := c.recvWithin(wait)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return 0, ErrNoAnswer
		}
		return 0, fmt.Errorf("wdmd open_watchdog reply: %w", err)
	}
	return int(r.FireTimeout), nil
}

// Close closes the connection. wdmd frees its slot if the expiry is 0;
// otherwise the slot stays, is tested, and fails at its expiry.
func (c *Conn) Close() error { return c.c.Close() }

// Dump returns wdmd's debug dump text (what "wdmd -d" prints).
func Dump(path string) (string, error) {
	c, err := Connect(path)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if err := c.send(&wdmd.Record{Cmd: wdmd.CmdDumpDebug}); err != nil {
		return "", err
	}
	_ = c.c.SetReadDeadline(time.Now().Add(c.timeout()))
	b := make([]byte, 1<<20)
	n, err := c.c.Read(b)
	if n == 0 && err != nil {
		return "", fmt.Errorf("wdmd dump: %w", err)
	}
	return strings.TrimRight(string(b[:n]), "\x00"), nil
}

// ErrFireTimeout is returned by Session.OpenWatchdog and Session.Activate
// when wdmd's fire timeout is not the session's (the device could not be
// armed, or it is armed with another timeout).
var ErrFireTimeout = errors.New("wdmd invalid fire_timeout")

// DefaultOpenWait bounds the wait for the answer to OPEN_WATCHDOG. wdmd 3.9
// and later (and ours) answer at once; 3.8.5 never answers.
const DefaultOpenWait = time.Second

// Session is the sanlock daemon's use of wdmd for one lockspace:
//
//	s, err := Open(sock, "LS", hostID)  // before the delta-lease acquire; error -> add fails -203
//	err = s.OpenWatchdog(fire, wait)    // arm the device (wdmd 3.9+); error -> close, add fails -203
//	err = s.Activate(L, L+8*io)         // after the acquire; error -> release, -203
//	err = s.Renewed(T, T+8*io)          // after each successful renewal; log errors
//	err = s.Deactivate()                // when all pids are clear / at rem_lockspace
//	s.Close()                           // at lockspace thread exit
//
// A session that never calls OpenWatchdog is a sanlock 3.8.5 session: it
// expects the device armed with 60 s from wdmd's start.
type Session struct {
	Conn *Conn
	Name string // "sanlock_<lockspace>:<host_id>"
	// FireTimeout is the device timeout this sanlock counts on
	// (watchdog_fire_timeout); Activate refuses another one. 0 means 60.
	FireTimeout int
	// Sleep is used for the one retry of Deactivate; nil means time.Sleep.
	Sleep func(time.Duration)

	path     string
	refcount bool
	// asked: OPEN_WATCHDOG was sent and not answered yet (wdmd 3.8.5, or a
	// slow wdmd whose answer Activate reads before STATUS's).
	asked bool
}

// Open connects to wdmd for the lockspace (name sanlock_<ls>:<hostID>).
func Open(path, lockspace string, hostID uint64) (*Session, error) {
	c, err := Connect(path)
	if err != nil {
		return nil, err
	}
	return &Session{Conn: c, Name: fmt.Sprintf("sanlock_%s:%d", lockspace, hostID), path: path}, nil
}

func (s *Session) fire() int {
	if s.FireTimeout > 0 {
		return s.FireTimeout
	}
	return wdmd.DefaultFireTimeout
}

// OpenWatchdog asks wdmd to arm the device with the session's fire
// timeout (OPEN_WATCHDOG, as sanlock 3.9 and later do before the
// delta-lease acquire), waiting up to wait (0: DefaultOpenWait) for the
// answer. An answer other than the fire timeout (0: the device could not
// be opened; another value: the device is armed with another timeout) is
// ErrFireTimeout, and the add must fail. No answer in time is not an
// error: wdmd 3.8.5 ignores the command and has armed the device at its
// start with 60 s; Activate then decides from the STATUS answer, which
// comes after any late answer to this command (one connection is served
// in order). A connection closed at the command (a gosanlock wdmd built
// without OPEN_WATCHDOG, which also arms the device at its start) is
// replaced by a new one, on which the session goes on as a 3.8.5 session.
func (s *Session) OpenWatchdog(wait time.Duration) error {
	if wait <= 0 {
		wait = DefaultOpenWait
	}
	got, err := s.Conn.OpenWatchdog(s.fire(), wait)
	if errors.Is(err, ErrNoAnswer) {
		s.asked = true
		return nil
	}
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
		// A gosanlock wdmd built without OPEN_WATCHDOG closes the
		// connection at an unknown command. Like wdmd 3.8.5 it arms the
		// device with 60 s at its start: connect again and go on as a
		// 3.8.5 session, which Activate checks through STATUS.
		c, cerr := Connect(s.path)
		if cerr != nil {
			return fmt.Errorf("wdmd closed the connection at open_watchdog: %w", cerr)
		}
		_ = s.Conn.Close()
		s.Conn = c
		return nil
	}
	if err != nil {
		return err
	}
	if got != s.fire() {
		return fmt.Errorf("%w: open_watchdog %d answered %d", ErrFireTimeout, s.fire(), got)
	}
	return nil
}

// Unanswered says that OpenWatchdog got no answer in time and none has
// been read since: the wdmd is taken for one that armed its device at
// its start (3.8.5), which Activate checks through STATUS.
func (s *Session) Unanswered() bool { return s.asked }

// Activate registers, sets the refcount, checks the fire timeout and sets
// the first expiry. On error the refcount is cleared again (if it was
// set); the caller closes the session and fails the add.
func (s *Session) Activate(renewal, expire uint64) error {
	err := s.activate(renewal, expire)
	if err != nil && s.refcount {
		_ = s.Conn.RefcountClear()
		s.refcount = false
	}
	return err
}

func (s *Session) activate(renewal, expire uint64) error {
	if err := s.Conn.Register(s.Name); err != nil {
		return err
	}
	if err := s.Conn.RefcountSet(); err != nil {
		return err
	}
	s.refcount = true
	st, open, err := s.Conn.status()
	if err != nil {
		return err
	}
	if s.asked && open >= 0 {
		// The late answer to OPEN_WATCHDOG.
		s.asked = false
		if open != s.fire() {
			return fmt.Errorf("%w: open_watchdog %d answered %d", ErrFireTimeout, s.fire(), open)
		}
	}
	if st.FireTimeout != s.fire() {
		return fmt.Errorf("%w %d vs %d", ErrFireTimeout, st.FireTimeout, s.fire())
	}
	return s.Conn.TestLive(renewal, expire)
}

// Renewed moves the expiry after a successful renewal at timestamp ts. An
// error means the connection to wdmd is broken; the C sanlock dies of
// SIGPIPE then, and the Go daemon must stop renewing (docs/wdmd.md "wdmd crash").
func (s *Session) Renewed(ts, expire uint64) error { return s.Conn.TestLive(ts, expire) }

// Deactivate removes the expiry (retrying once after 0.5 s) and clears
// the refcount, so wdmd keeps pinging and may quit.
func (s *Session) Deactivate() error {
	err := s.Conn.TestLive(0, 0)
	if err != nil {
		sleep := s.Sleep
		if sleep == nil {
			sleep = time.Sleep
		}
		sleep(500 * time.Millisecond)
		err = s.Conn.TestLive(0, 0)
	}
	if e := s.Conn.RefcountClear(); err == nil {
		err = e
	}
	s.refcount = false
	return err
}

// Close closes the connection.
func (s *Session) Close() error { return s.Conn.Close() }
