// Package wdmdclient is the client side of the wdmd socket protocol: what
// libwdmd gives the C sanlock daemon (connect, register, refcount set and
// clear, test_live, status) plus the dump request, and Session, the
// sequence the sanlock daemon runs per lockspace (docs/wdmd.md "Client protocol", "sanlock side").
// It talks to our wdmd and to wdmd 3.8.5 alike.
package wdmdclient

import (
	"errors"
	"fmt"
	"net"
	"strings"
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
func (c *Conn) Status() (Status, error) {
	if err := c.send(&wdmd.Record{Cmd: wdmd.CmdStatus}); err != nil {
		return Status{}, err
	}
	b := make([]byte, wdmd.RecordSize)
	_ = c.c.SetReadDeadline(time.Now().Add(c.timeout()))
	if _, err := readFull(c.c, b); err != nil {
		return Status{}, fmt.Errorf("wdmd status reply: %w", err)
	}
	var r wdmd.Record
	_ = r.Unmarshal(b)
	return Status{TestInterval: int(r.TestInterval), FireTimeout: int(r.FireTimeout), LastKeepalive: r.LastKeepalive}, nil
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
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

// ErrFireTimeout is returned by Session.Activate when wdmd's fire timeout
// is not the one sanlock expects (60).
var ErrFireTimeout = errors.New("wdmd invalid fire_timeout")

// Session is the sanlock daemon's use of wdmd for one lockspace:
//
//	s, err := Open(sock, "LS", hostID)  // before the delta-lease acquire; error -> add fails -203
//	err = s.Activate(L, L+8*io)         // after the acquire; error -> release, -203
//	err = s.Renewed(T, T+8*io)          // after each successful renewal; log errors
//	err = s.Deactivate()                // when all pids are clear / at rem_lockspace
//	s.Close()                           // at lockspace thread exit
type Session struct {
	Conn *Conn
	Name string // "sanlock_<lockspace>:<host_id>"
	// Sleep is used for the one retry of Deactivate; nil means time.Sleep.
	Sleep func(time.Duration)

	refcount bool
}

// Open connects to wdmd for the lockspace (name sanlock_<ls>:<hostID>).
func Open(path, lockspace string, hostID uint64) (*Session, error) {
	c, err := Connect(path)
	if err != nil {
		return nil, err
	}
	return &Session{Conn: c, Name: fmt.Sprintf("sanlock_%s:%d", lockspace, hostID)}, nil
}

// Activate registers, sets the refcount, checks the fire timeout (60)
// and sets the first expiry. On error the refcount is cleared again (if
// it was set); the caller closes the session and fails the add.
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
	st, err := s.Conn.Status()
	if err != nil {
		return err
	}
	if st.FireTimeout != wdmd.DefaultFireTimeout {
		return fmt.Errorf("%w %d vs %d", ErrFireTimeout, st.FireTimeout, wdmd.DefaultFireTimeout)
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
