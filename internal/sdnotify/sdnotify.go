// Package sdnotify speaks the systemd service notification protocol
// without libsystemd: one datagram per state change ("READY=1",
// "WATCHDOG=1", "STOPPING=1") sent to the unix datagram socket named by
// $NOTIFY_SOCKET, which systemd sets for Type=notify services. With
// WatchdogSec= in the unit, systemd also sets WATCHDOG_USEC (and
// WATCHDOG_PID) and restarts or kills the service when the pings stop.
//
// Nothing here is needed outside systemd: when NOTIFY_SOCKET is unset every
// function does nothing.
package sdnotify

import (
	"errors"
	"net"
	"os"
	"strconv"
	"sync"
	"time"
)

// Environment variables of the protocol (see systemd's sd_notify(3) and
// sd_watchdog_enabled(3)).
const (
	EnvSocket        = "NOTIFY_SOCKET"
	EnvWatchdogUSec  = "WATCHDOG_USEC"
	EnvWatchdogPid   = "WATCHDOG_PID"
	StateReady       = "READY=1"
	StateStopping    = "STOPPING=1"
	StateWatchdog    = "WATCHDOG=1"
	defaultWriteWait = time.Second
)

// Active reports whether the process was started by systemd as a
// Type=notify service. A daemon that would fork into the background stays
// in the foreground then: systemd supervises the process it started.
func Active() bool { return os.Getenv(EnvSocket) != "" }

// Notifier sends states to one notification socket.
type Notifier struct {
	addr     *net.UnixAddr
	watchdog time.Duration // WATCHDOG_USEC for this process, 0 if none
}

// FromEnv returns the notifier that the environment describes, or nil
// when NOTIFY_SOCKET is unset or names no usable socket. With unset, the
// three variables are removed from the environment afterwards, so that the
// programs the daemon starts do not talk to systemd in its name.
func FromEnv(unset bool) *Notifier {
	path := os.Getenv(EnvSocket)
	usec := os.Getenv(EnvWatchdogUSec)
	wpid := os.Getenv(EnvWatchdogPid)
	if unset {
		_ = os.Unsetenv(EnvSocket)
		_ = os.Unsetenv(EnvWatchdogUSec)
		_ = os.Unsetenv(EnvWatchdogPid)
	}
	if path == "" || (path[0] != '/' && path[0] != '@') {
		return nil
	}
	// A leading '@' is a Linux abstract socket; net.UnixAddr maps it.
	n := &Notifier{addr: &net.UnixAddr{Name: path, Net: "unixgram"}}
	n.watchdog = watchdogInterval(usec, wpid, os.Getpid())
	return n
}

// watchdogInterval parses WATCHDOG_USEC; it is for us only when
// WATCHDOG_PID is unset or names pid.
func watchdogInterval(usec, wpid string, pid int) time.Duration {
	if usec == "" {
		return 0
	}
	if wpid != "" {
		if p, err := strconv.Atoi(wpid); err != nil || p != pid {
			return 0
		}
	}
	u, err := strconv.ParseUint(usec, 10, 63)
	if err != nil || u == 0 {
		return 0
	}
	return time.Duration(u) * time.Microsecond
}

// WatchdogTimeout is WatchdogSec= of the unit as systemd passed it, 0 when
// the service watchdog is off.
func (n *Notifier) WatchdogTimeout() time.Duration {
	if n == nil {
		return 0
	}
	return n.watchdog
}

// Send sends one state string ("READY=1", or several lines joined by
// newlines). A nil notifier sends nothing.
func (n *Notifier) Send(state string) error {
	if n == nil {
		return nil
	}
	c, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetWriteDeadline(time.Now().Add(defaultWriteWait))
	k, err := c.Write([]byte(state))
	if err == nil && k != len(state) {
		err = errors.New("sdnotify: short write")
	}
	return err
}

// Ready tells systemd that the service is up (READY=1) and, when the unit
// has WatchdogSec=, starts sending WATCHDOG=1 at half that period for as
// long as healthy (nil: always) returns true. The returned stop function
// ends the pings and sends STOPPING=1; it may be called more than once.
// On a nil notifier both do nothing.
func (n *Notifier) Ready(healthy func() bool) (stop func()) {
	if n == nil {
		return func() {}
	}
	_ = n.Send(StateReady)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	if n.watchdog > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(n.watchdog / 2)
			defer t.Stop()
			for {
				select {
				case <-quit:
					return
				case <-t.C:
					if healthy == nil || healthy() {
						_ = n.Send(StateWatchdog)
					}
				}
			}
		}()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			close(quit)
			wg.Wait()
			_ = n.Send(StateStopping)
		})
	}
}

// Start is the one call a daemon makes once it serves requests:
// FromEnv(true) followed by Ready(healthy). It returns the stop function.
func Start(healthy func() bool) (stop func()) {
	return FromEnv(true).Ready(healthy)
}
