package wdmdcli

import (
	"crypto/rand"
	"encoding/binary"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/wdmd"
	"github.com/gosanlock/gosanlock/wdmd/testdev"
	"github.com/gosanlock/gosanlock/wdmd/wdmdclient"
)

// TestDaemonLifecycle: startup files and log lines, the device probed at
// start and left disarmed, single instance, the crash marker, SIGTERM exit
// (docs/wdmd.md "Files", "Startup").
func TestDaemonLifecycle(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "", testdev.Options{InitialTimeout: 30})
	d.waitReady(t)
	gid, _ := lookupGroup("sanlock")
	lines := d.p.lines()
	require.Equal(t, []string{"/dev/watchdog0 gettimeout reported 30", "wdmd started S0 H0 G" + strconv.Itoa(gid) + ` using /dev/watchdog0 "unknown"`}, lines[:2])
	evs := d.bank.Events()
	require.Equal(t, []testdev.Kind{testdev.Open, testdev.GetTimeout, testdev.Write, testdev.CloseClean},
		[]testdev.Kind{evs[0].Kind, evs[1].Kind, evs[2].Kind, evs[3].Kind})
	require.False(t, d.bank.Armed("/dev/watchdog0"))

	pid, err := os.ReadFile(filepath.Join(d.runDir, "wdmd.pid"))
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(d.p.cmd.Process.Pid)+"\n", string(pid))
	fi, err := os.Stat(d.socket())
	require.NoError(t, err)
	require.Equal(t, os.ModeSocket|0o660, fi.Mode()&(os.ModeSocket|os.ModePerm))
	require.EqualValues(t, gid, fi.Sys().(*syscall.Stat_t).Gid)
	_, err = os.Stat(d.marker)
	require.NoError(t, err)

	// A second daemon on the same run dir fails at the pid file lock.
	second := start(t, nil, wdmdBin, "-D", "--run-dir", d.runDir, "--shm-marker", d.marker+"2", "--test-device", d.sock)
	require.Equal(t, 255, second.wait(t, 10*time.Second))
	require.Contains(t, second.lines(), "lockfile setlk error "+filepath.Join(d.runDir, "wdmd.pid")+": Resource temporarily unavailable")

	// Dump of an idle daemon.
	dump, err := wdmdclient.Dump(d.socket())
	require.NoError(t, err)
	dl := strings.Split(strings.TrimSuffix(dump, "\n"), "\n")
	require.Len(t, dl, 4)
	require.Regexp(t, `^wdmd \d+ socket_gid \d+ high_priority 0 now \d+ last_keepalive \d+ last_closeunclean 0 allow_scripts 0 kill_script_sec 0 fire_timeout 60 identity ""$`, dl[0])
	require.Regexp(t, `^client 0 name signal pid 0 fd -1 dead 0 ref 0 now \d+ renewal 0 expire 0$`, dl[1])
	require.Regexp(t, `^client 1 name listen pid 0 fd \d+ dead 0 ref 0 now \d+ renewal 0 expire 0$`, dl[2])
	require.Regexp(t, `^client 2 name dump pid 0 fd \d+ dead 0 ref 0 now \d+ renewal 0 expire 0$`, dl[3])
	// wdmd -d prints the same.
	dp := start(t, nil, wdmdBin, "--run-dir", d.runDir, "-d") // -d acts at once: options after it are ignored
	require.Equal(t, 0, dp.wait(t, 10*time.Second))
	require.Regexp(t, `^wdmd \d+ socket_gid`, dp.out.String())

	d.p.signal(syscall.SIGTERM)
	require.Equal(t, 0, d.p.wait(t, 10*time.Second))
	require.Equal(t, "close_watchdog already closed", last(d.p.lines()))
	evs = d.bank.Events()
	require.Len(t, evs, 4, "the device was never armed")
	_, err = os.Stat(d.marker)
	require.True(t, os.IsNotExist(err), "crash marker removed")
	_, err = os.Stat(filepath.Join(d.runDir, "wdmd.pid"))
	require.True(t, os.IsNotExist(err), "pid file removed")
	_, err = os.Stat(d.socket())
	require.NoError(t, err, "socket left in place")

	// A stale crash marker (wdmd crashed, no reboot yet) refuses the start.
	require.NoError(t, os.WriteFile(d.marker, nil, 0o644))
	third := start(t, nil, wdmdBin, "-D", "--run-dir", d.runDir, "--shm-marker", d.marker, "--test-device", d.sock)
	require.Equal(t, 255, third.wait(t, 10*time.Second))
	require.Equal(t, "other wdmd not cleanly stopped, shm_open error 17", last(third.lines()))
	_, err = os.Stat(filepath.Join(d.runDir, "wdmd.pid"))
	require.True(t, os.IsNotExist(err), "pid file removed")
}

// TestNoDevice: no usable candidate ends the daemon with 255
// (docs/wdmd.md "Device selection").
func TestNoDevice(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "", testdev.Options{Paths: []string{"/dev/other"}})
	require.Equal(t, 255, d.p.wait(t, 10*time.Second))
	lines := d.p.lines()
	require.Equal(t, []string{"no watchdog device, load a watchdog driver"}, lines)
	_, err := os.Stat(d.marker)
	require.True(t, os.IsNotExist(err))
}

// TestOpenRefused: a device that rejects the timeout asked by
// OPEN_WATCHDOG is disarmed again; the answer is 0 and the Go session
// refuses to go on (its add_lockspace fails -203).
func TestOpenRefused(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "", testdev.Options{InitialTimeout: 30, RejectSetTimeout: true})
	d.waitReady(t)
	s, err := wdmdclient.Open(d.socket(), "LS", 1)
	require.NoError(t, err)
	defer s.Close()
	require.ErrorIs(t, s.OpenWatchdog(0), wdmdclient.ErrFireTimeout)
	require.False(t, d.bank.Armed("/dev/watchdog0"))
	waitFor(t, 5*time.Second, "the open_watchdog log line", func() bool {
		return strings.Contains(d.p.out.String(), "open_watchdog fire_timeout 60 result 0")
	})
}

// TestGoClient: the Go client's per-lockspace session against our
// daemon, seen through the dump and the device.
func TestGoClient(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "", testdev.Options{FireAfter: 3 * time.Second}, "--test-interval", "1")
	d.waitReady(t)
	s, err := wdmdclient.Open(d.socket(), "LS", 1)
	require.NoError(t, err)
	require.NoError(t, s.OpenWatchdog(0))
	require.True(t, d.bank.Armed("/dev/watchdog0"))
	now := monoNow()
	require.NoError(t, s.Activate(now, now+16))
	st, err := s.Conn.Status()
	require.NoError(t, err)
	require.Equal(t, wdmdclient.Status{TestInterval: 1, FireTimeout: 60, LastKeepalive: st.LastKeepalive}, st)
	require.InDelta(t, float64(now), float64(st.LastKeepalive), 2)
	require.NoError(t, s.Renewed(now+1, now+17))
	// records on different connections are not ordered: wait for it
	want := regexp.MustCompile(`client 2 name sanlock_LS:1 pid ` + strconv.Itoa(os.Getpid()) + ` fd \d+ dead 0 ref 1 now \d+ renewal ` +
		strconv.FormatUint(now+1, 10) + ` expire ` + strconv.FormatUint(now+17, 10) + `\n`)
	waitFor(t, 5*time.Second, "test_live in the dump", func() bool {
		dump, err := wdmdclient.Dump(d.socket())
		return err == nil && want.MatchString(dump)
	})
	// SIGTERM is ignored while the refcount is set.
	d.p.signal(syscall.SIGTERM)
	time.Sleep(300 * time.Millisecond)
	require.True(t, d.p.running())

	require.NoError(t, s.Deactivate())
	require.NoError(t, s.Close())
	waitFor(t, 5*time.Second, "slot freed", func() bool {
		dump, err := wdmdclient.Dump(d.socket())
		return err == nil && !strings.Contains(dump, "sanlock_LS")
	})
	require.Empty(t, countKind(d.bank.Events(), testdev.CloseUnclean))
	d.p.signal(syscall.SIGTERM)
	require.Equal(t, 0, d.p.wait(t, 10*time.Second))
	_, fired := d.bank.FireEvent()
	require.False(t, fired)

	// A name over 128 bytes is refused before sending.
	c := &wdmdclient.Conn{}
	require.Error(t, c.Register(strings.Repeat("x", 129)))
}

// TestGoClientExpiry: a session whose renewals stop makes wdmd close the
// device unclean at expire-10 and the device fires; the daemon then
// ignores SIGTERM (refcount of the dead slot). The session never sends
// OPEN_WATCHDOG, as sanlock 3.8.5: its REGISTER arms the device.
func TestGoClientExpiry(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "", testdev.Options{FireAfter: 2 * time.Second}, "--test-interval", "1")
	d.waitReady(t)
	s, err := wdmdclient.Open(d.socket(), "LS", 2)
	require.NoError(t, err)
	now := monoNow()
	require.NoError(t, s.Activate(now, now+12)) // warning from now+2
	require.NoError(t, s.Close())               // sanlock killed
	fire, err := d.bank.WaitFired(t.Context())
	require.NoError(t, err)
	var closeAt time.Duration
	for _, e := range d.bank.Events() {
		if e.Kind == testdev.CloseUnclean {
			closeAt = e.At
		}
	}
	require.NotZero(t, closeAt)
	require.GreaterOrEqual(t, uint64(closeAt/time.Second), now+2)
	require.Less(t, uint64(closeAt/time.Second), now+4)
	require.InDelta(t, 2.0, (fire.At - closeAt).Seconds(), 0.3)
	out := d.p.out.String()
	require.Contains(t, out, "client dead ci 2 fd")
	require.Contains(t, out, "test warning now")
	require.Contains(t, out, "/dev/watchdog0 closed unclean")
	d.p.signal(syscall.SIGTERM)
	time.Sleep(200 * time.Millisecond)
	require.True(t, d.p.running())
	d.p.signal(syscall.SIGKILL)
	d.p.wait(t, 10*time.Second)
}

// TestBadInput: random bytes, truncated records and unknown commands
// close only the connection that sent them; the daemon and its other
// clients carry on, and nothing reaches the device.
func TestBadInput(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "", testdev.Options{}, "--test-interval", "1")
	d.waitReady(t)
	good, err := wdmdclient.Open(d.socket(), "GOOD", 1)
	require.NoError(t, err)
	now := monoNow()
	require.NoError(t, good.Activate(now, now+1000))

	rng := mrand.New(mrand.NewPCG(1, 2))
	send := func(b []byte) {
		c, err := net.Dial("unix", d.socket())
		require.NoError(t, err)
		_, _ = c.Write(b)
		if rng.IntN(2) == 0 {
			_ = c.Close()
			return
		}
		// leave it open: the daemon must close it (unknown command) or
		// keep waiting for the rest (truncated record) without harm
		t.Cleanup(func() { _ = c.Close() })
	}
	for i := 0; i < 50; i++ {
		var b []byte
		switch i % 3 {
		case 0: // random bytes of random length
			b = make([]byte, rng.IntN(3*wdmd.RecordSize))
			_, _ = rand.Read(b)
			if len(b) >= 8 {
				binary.LittleEndian.PutUint32(b[4:], 1000+rng.Uint32N(1<<20)) // not a command
			}
		case 1: // a truncated valid record
			r := wdmd.Record{Cmd: wdmd.CmdTestLive, RenewalTime: now, ExpireTime: now + 5}
			b = r.Marshal()[:rng.IntN(wdmd.RecordSize)]
		case 2: // an unknown command
			r := wdmd.Record{Cmd: 8 + rng.Uint32N(3)}
			b = r.Marshal()
		}
		send(b)
	}
	// The good client still works and its slot is unchanged.
	st, err := good.Conn.Status()
	require.NoError(t, err)
	require.Equal(t, 60, st.FireTimeout)
	require.NoError(t, good.Renewed(now+1, now+1001))
	waitFor(t, 5*time.Second, "bad connections closed", func() bool {
		dump, err := wdmdclient.Dump(d.socket())
		if err != nil {
			return false
		}
		// signal, listen, GOOD, dump, plus the still-open truncated ones
		// (their records never completed and they have no expiry)
		for _, l := range strings.Split(dump, "\n") {
			if strings.Contains(l, "expire") && !strings.HasSuffix(l, "expire 0") && !strings.Contains(l, "sanlock_GOOD:1") {
				return false
			}
		}
		return strings.Contains(dump, "name sanlock_GOOD:1 pid")
	})
	require.True(t, d.p.running())
	require.Empty(t, countKind(d.bank.Events(), testdev.CloseUnclean))
	require.Contains(t, d.p.out.String(), "unknown cmd 8")
	require.NoError(t, good.Deactivate())
	require.NoError(t, good.Close())
	waitFor(t, 5*time.Second, "slot freed", func() bool {
		dump, err := wdmdclient.Dump(d.socket())
		return err == nil && !strings.Contains(dump, "GOOD")
	})
	d.p.signal(syscall.SIGTERM)
	require.Equal(t, 0, d.p.wait(t, 10*time.Second))
}

func last(s []string) string { return s[len(s)-1] }

func monoNow() uint64 {
	var ts syscall.Timespec
	_ = clockGettime(&ts)
	return uint64(ts.Sec)
}
