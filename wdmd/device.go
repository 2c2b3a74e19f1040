package wdmd

import (
	"errors"
	"fmt"
	"io"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Driver opens watchdog devices. The real one (package wdmd/watchdog)
// uses /dev/watchdog* and the kernel ioctls; package wdmd/testdev has an
// emulated one.
type Driver interface {
	// Stat reports whether path exists (stat(2)).
	Stat(path string) error
	// Open opens path write-only. On a real device this starts the timer.
	Open(path string) (Watchdog, error)
}

// Watchdog is one open watchdog device (kernel semantics, docs/wdmd.md "Device rules"):
// GetTimeout and SetTimeout are WDIOC_GETTIMEOUT and WDIOC_SETTIMEOUT
// (which also pings), Keepalive is WDIOC_KEEPALIVE, Write writes bytes
// (writing "V" just before Close is the magic close that stops the timer;
// any other Close leaves the timer running after one last ping).
type Watchdog interface {
	GetTimeout() (int, error)
	SetTimeout(seconds int) (int, error)
	Keepalive() error
	Write(p []byte) (int, error)
	Close() error
}

// Default device candidates, tried after the -w path (docs/wdmd.md "Device selection").
var defaultCandidates = [...]string{"/dev/watchdog0", "/dev/watchdog1", "/dev/watchdog"}

// Candidates returns the device paths wdmd tries, in order: first (the
// -w option, if any), then /dev/watchdog0, /dev/watchdog1, /dev/watchdog,
// without repeats.
func Candidates(first string) []string {
	var out []string
	add := func(p string) {
		if p == "" {
			return
		}
		for _, q := range out {
			if q == p {
				return
			}
		}
		out = append(out, p)
	}
	if len(first) > 63 { // wdmd keeps 63 characters of -w
		first = first[:63]
	}
	add(first)
	for _, p := range defaultCandidates {
		add(p)
	}
	return out
}

// errno extracts the errno of err for log lines (0 if there is none, -1
// style values are never produced).
func errno(err error) int {
	var e unix.Errno
	if errors.As(err, &e) {
		return int(e)
	}
	if err == nil {
		return 0
	}
	return int(unix.EIO)
}

// ErrNoDevice is returned when no candidate could be opened and armed.
var ErrNoDevice = errors.New("no watchdog device, load a watchdog driver")

// device is the watchdog and its state in the test loop. It is open
// (wd set), closed unclean (armed: the timer runs since the last ping and
// the test loop reopens it once every client passes), or closed idle
// (disarmed by the magic close, or never opened).
type device struct {
	drv  Driver
	path string
	wd   Watchdog // nil while closed
	log  *zap.Logger
	fire int // the timeout set on the device (the last one while closed)
	// identity is the driver's name, if the device tells it (dump).
	identity string
	// unclean: closed without the magic, so armed and counting.
	unclean bool

	lastKeepalive    uint64
	lastCloseUnclean uint64
}

// armed says whether the device's timer runs: open, or closed unclean.
func (d *device) armed() bool { return d.wd != nil || d.unclean }

// selectDevice finds the device like wdmd 3.9 at its start (docs/wdmd.md
// "Device selection"): per candidate, open it, read its timeout and
// disarm it at once with the magic close. The first that reports a
// timeout is the device; it stays closed until a client needs it (open).
func selectDevice(drv Driver, candidates []string, fire int, log *zap.Logger) (*device, error) {
	for _, p := range candidates {
		if drv.Stat(p) != nil {
			continue
		}
		wd, err := drv.Open(p)
		if err != nil {
			log.Error(fmt.Sprintf("open %s error %d", p, errno(err)))
			continue
		}
		d := &device{drv: drv, path: p, wd: wd, log: log, fire: fire}
		t, err := wd.GetTimeout()
		if err != nil {
			log.Error(fmt.Sprintf("%s failed to report timeout", p))
			d.closeQuiet()
			continue
		}
		log.Error(fmt.Sprintf("%s gettimeout reported %d", p, t))
		if id, ok := wd.(interface{ Identity() (string, error) }); ok {
			d.identity, _ = id.Identity()
		}
		d.closeQuiet()
		return d, nil
	}
	log.Error(ErrNoDevice.Error())
	return nil, ErrNoDevice
}

// open opens the device and sets its timeout to fire seconds unless it
// already has it, then pings (wdmd 3.9's answer to the first
// OPEN_WATCHDOG). It returns the timeout now in force. On any failure the
// device is disarmed and stays closed.
func (d *device) open(fire int, now uint64) (int, error) {
	wd, err := d.drv.Open(d.path)
	if err != nil {
		d.log.Error(fmt.Sprintf("open %s error %d", d.path, errno(err)))
		return 0, err
	}
	d.wd = wd
	t, err := wd.GetTimeout()
	if err != nil {
		d.log.Error(fmt.Sprintf("%s failed to report timeout", d.path))
		d.closeQuiet()
		return 0, err
	}
	if t != fire {
		if _, err = wd.SetTimeout(fire); err == nil {
			t, err = wd.GetTimeout()
		}
		if err != nil || t != fire {
			d.log.Error(fmt.Sprintf("%s failed to set timeout %d", d.path, fire))
			d.closeQuiet()
			if err == nil {
				err = unix.EINVAL
			}
			return 0, err
		}
	}
	d.fire = t
	d.log.Error(fmt.Sprintf("%s open with timeout %d", d.path, t))
	d.ping(now)
	return t, nil
}

// closeQuiet is a magic close without log lines.
func (d *device) closeQuiet() {
	_, _ = d.wd.Write([]byte("V"))
	_ = d.wd.Close()
	d.wd = nil
}

func (d *device) isOpen() bool { return d.wd != nil }

// ping is WDIOC_KEEPALIVE; last_keepalive moves even if it fails.
func (d *device) ping(now uint64) {
	err := d.wd.Keepalive()
	d.lastKeepalive = now
	rv := 0
	if err != nil {
		rv = -1
	}
	d.log.Debug(fmt.Sprintf("keepalive %d", rv))
}

// closeClean is the magic close: "V", then close. The timer stops.
func (d *device) closeClean() {
	if d.wd == nil {
		d.log.Error("close_watchdog already closed")
		return
	}
	if _, err := d.wd.Write([]byte("V")); err != nil {
		d.log.Error(fmt.Sprintf("%s disarm write error %d", d.path, errno(err)))
	} else {
		d.log.Error(fmt.Sprintf("%s disarmed", d.path))
	}
	_ = d.wd.Close()
	d.wd = nil
}

// closeUnclean closes without the magic: the kernel pings one last time
// and keeps the timer running.
func (d *device) closeUnclean(now uint64) {
	if d.wd == nil {
		d.log.Debug("close_watchdog_unclean already closed")
		return
	}
	_ = d.wd.Close()
	d.wd = nil
	d.unclean = true
	d.lastCloseUnclean = now
	d.log.Error(fmt.Sprintf("%s closed unclean", d.path))
}

// reopen opens the device again (the driver kept its timeout) and pings.
// If the open fails the device stays closed and the next test retries.
func (d *device) reopen(now uint64) {
	wd, err := d.drv.Open(d.path)
	if err != nil {
		d.log.Error(fmt.Sprintf("open %s error %d", d.path, errno(err)))
		return
	}
	d.wd = wd
	d.unclean = false
	d.log.Error(fmt.Sprintf("%s reopen", d.path))
	d.ping(now)
}

// Probe looks for a functional device like "wdmd --probe" (docs/wdmd.md "Probe"):
// per candidate it reports errors on stderr, prints the first usable path
// on stdout, and always ends with a magic close. It returns false when no
// candidate works (after printing ErrNoDevice on stderr).
func Probe(drv Driver, first string, fire int, stdout, stderr io.Writer) bool {
	for _, p := range Candidates(first) {
		if err := drv.Stat(p); err != nil {
			fmt.Fprintf(stderr, "error %d stat %s\n", errno(err), p)
			continue
		}
		wd, err := drv.Open(p)
		if err != nil {
			fmt.Fprintf(stderr, "error %d open %s\n", errno(err), p)
			continue
		}
		ok := false
		t, err := wd.GetTimeout()
		switch {
		case err != nil:
			fmt.Fprintf(stderr, "error %d ioctl gettimeout %s\n", errno(err), p)
		case t == fire:
			ok = true
		default:
			t, err = wd.SetTimeout(fire)
			switch {
			case err != nil:
				fmt.Fprintf(stderr, "error %d ioctl settimeout %s\n", errno(err), p)
			case t != fire:
				fmt.Fprintf(stderr, "error %d invalid timeout %s\n", 0, p)
			default:
				ok = true
			}
		}
		if ok {
			fmt.Fprintf(stdout, "%s\n", p)
		}
		if n, err := wd.Write([]byte("V")); err != nil || n != 1 {
			fmt.Fprintf(stderr, "probe failed to disarm %s error %d %d\n", p, n, errno(err))
		}
		_ = wd.Close()
		if ok {
			return true
		}
	}
	fmt.Fprintf(stderr, "%s\n", ErrNoDevice)
	return false
}
