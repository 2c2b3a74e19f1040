package wdmdclient

import (
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/wdmd"
)

// fakeWdmd answers each record on one connection with answer (nil: no
// reply), after delay for OPEN_WATCHDOG.
func fakeWdmd(t *testing.T, answer func(r wdmd.Record) *wdmd.Record, delay time.Duration) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "wdmd.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b := make([]byte, wdmd.RecordSize)
		for {
			n := 0
			for n < len(b) {
				m, err := c.Read(b[n:])
				if err != nil {
					return
				}
				n += m
			}
			var r wdmd.Record
			_ = r.Unmarshal(b)
			a := answer(r)
			if a == nil {
				continue
			}
			if r.Cmd == wdmd.CmdOpenWatchdog {
				// late, but before the answer to anything sent after it
				time.Sleep(delay)
			}
			_, _ = c.Write(a.Marshal())
		}
	}()
	return sock
}

// wdmd39 answers like wdmd 3.9+: OPEN_WATCHDOG with inForce (0: refused),
// STATUS with it.
func wdmd39(inForce uint32) func(r wdmd.Record) *wdmd.Record {
	return func(r wdmd.Record) *wdmd.Record {
		switch r.Cmd {
		case wdmd.CmdOpenWatchdog, wdmd.CmdStatus:
			r.FireTimeout = inForce
			r.TestInterval = 10
			return &r
		}
		return nil
	}
}

// wdmd385 ignores OPEN_WATCHDOG; STATUS says 60.
func wdmd385(r wdmd.Record) *wdmd.Record {
	if r.Cmd == wdmd.CmdStatus {
		r.FireTimeout, r.TestInterval = 60, 10
		return &r
	}
	return nil
}

func session(t *testing.T, sock string, fire int) *Session {
	t.Helper()
	s, err := Open(sock, "LS", 1)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	s.FireTimeout = fire
	return s
}

func TestOpenWatchdogAgreed(t *testing.T) {
	s := session(t, fakeWdmd(t, wdmd39(30), 0), 30)
	require.NoError(t, s.OpenWatchdog(time.Second))
	require.NoError(t, s.Activate(100, 116))
}

// TestOpenWatchdogRefused: 0 (device not armed) or another timeout in
// force refuses the session, as sanlock 3.9.5 does ("open_watchdog with
// fire_timeout 60 failed", add_lockspace -203).
func TestOpenWatchdogRefused(t *testing.T) {
	for _, inForce := range []uint32{0, 30} {
		s := session(t, fakeWdmd(t, wdmd39(inForce), 0), 60)
		require.ErrorIs(t, s.OpenWatchdog(time.Second), ErrFireTimeout)
	}
}

// TestOpenWatchdog385: no answer within the wait (wdmd 3.8.5); STATUS
// decides: 60 is accepted for a 60-s sanlock, refused for a 30-s one.
func TestOpenWatchdog385(t *testing.T) {
	s := session(t, fakeWdmd(t, wdmd385, 0), 60)
	require.NoError(t, s.OpenWatchdog(200*time.Millisecond))
	require.NoError(t, s.Activate(100, 116))

	s = session(t, fakeWdmd(t, wdmd385, 0), 30)
	require.NoError(t, s.OpenWatchdog(200*time.Millisecond))
	require.ErrorIs(t, s.Activate(100, 116), ErrFireTimeout)
}

// TestOpenWatchdogLate: an answer that comes after the wait is read by
// Activate before STATUS's, and judged.
func TestOpenWatchdogLate(t *testing.T) {
	s := session(t, fakeWdmd(t, wdmd39(60), 500*time.Millisecond), 60)
	require.NoError(t, s.OpenWatchdog(50*time.Millisecond))
	require.NoError(t, s.Activate(100, 116))

	s = session(t, fakeWdmd(t, wdmd39(0), 500*time.Millisecond), 60)
	require.NoError(t, s.OpenWatchdog(50*time.Millisecond))
	require.ErrorIs(t, s.Activate(100, 116), ErrFireTimeout)
}

// TestOpenWatchdogDropped: a wdmd that closes the connection at the
// command (a gosanlock wdmd built without OPEN_WATCHDOG, whose device is armed from
// its start) gets a new connection, and the session goes on as a 3.8.5
// one: STATUS must say the session's timeout.
func TestOpenWatchdogDropped(t *testing.T) {
	for _, fire := range []int{60, 30} {
		sock := filepath.Join(t.TempDir(), "wdmd.sock")
		l, err := net.Listen("unix", sock)
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					b := make([]byte, wdmd.RecordSize)
					for {
						n := 0
						for n < len(b) {
							m, err := c.Read(b[n:])
							if err != nil {
								return
							}
							n += m
						}
						var r wdmd.Record
						_ = r.Unmarshal(b)
						switch r.Cmd {
						case wdmd.CmdOpenWatchdog:
							return // "unknown cmd 7": connection closed
						case wdmd.CmdStatus:
							r.FireTimeout = 60
							_, _ = c.Write(r.Marshal())
						}
					}
				}()
			}
		}()
		s := session(t, sock, fire)
		require.NoError(t, s.OpenWatchdog(time.Second))
		if fire == 60 {
			require.NoError(t, s.Activate(100, 116))
		} else {
			require.ErrorIs(t, s.Activate(100, 116), ErrFireTimeout)
		}
	}
}
