package wdmd

import (
	"context"
	"fmt"
	"io"
	"time"
)

// TryOptions are the inputs of TryTimeout besides the device driver.
type TryOptions struct {
	First   string // -w
	Timeout int    // -t seconds (> 0)
	// Force (-F) pings once and then waits for the device to reset the
	// machine, counting the seconds up to Timeout+4.
	Force bool
	Clock Clock
	// Wall gives the date and time printed at the start of each line.
	Wall func() time.Time
}

// TryTimeout is "wdmd --trytimeout N [--forcefire]" (wdmd 3.9 and later):
// it opens the first device of Candidates(First) that exists, reads its
// timeout, sets Timeout when it differs and reads it back, pings once,
// and, with Force, waits (one line a second) for the device to fire;
// then it disarms the device with the magic close. Each step is a line
// on stdout; a failed stat or ioctl goes to stderr. It returns the exit
// status: 0, or 1 when no device could be used or a step failed.
func TryTimeout(ctx context.Context, drv Driver, o TryOptions, stdout, stderr io.Writer) int {
	line := func(format string, args ...any) {
		fmt.Fprintf(stdout, "%s  %s\n", o.Wall().Format("2006-01-02 15:04:05"), fmt.Sprintf(format, args...))
	}
	for _, p := range Candidates(o.First) {
		if err := drv.Stat(p); err != nil {
			fmt.Fprintf(stderr, "%s stat error %d\n", p, errno(err))
			continue
		}
		wd, err := drv.Open(p)
		if err != nil {
			fmt.Fprintf(stderr, "%s open error %d\n", p, errno(err))
			continue
		}
		fd := -1
		if f, ok := wd.(interface{ Fd() int }); ok {
			fd = f.Fd()
		}
		line("%s open fd %d", p, fd)
		status := tryDevice(ctx, wd, p, fd, o, line, stderr)
		rv := 0
		if n, err := wd.Write([]byte("V")); err != nil || n != 1 {
			rv = -1
		}
		line("%s disarm write V fd %d result %d", p, fd, rv)
		rv = 0
		if err := wd.Close(); err != nil {
			rv = -1
		}
		line("%s close fd %d result %d", p, fd, rv)
		return status
	}
	fmt.Fprintf(stderr, "%s\n", ErrNoDevice)
	return 1
}

func tryDevice(ctx context.Context, wd Watchdog, p string, fd int, o TryOptions, line func(string, ...any), stderr io.Writer) int {
	t, err := wd.GetTimeout()
	if err != nil {
		fmt.Fprintf(stderr, "%s gettimeout error %d\n", p, errno(err))
		return 1
	}
	line("%s gettimeout %d", p, t)
	if t != o.Timeout {
		r, err := wd.SetTimeout(o.Timeout)
		if err != nil {
			fmt.Fprintf(stderr, "%s settimeout %d error %d\n", p, o.Timeout, errno(err))
			return 1
		}
		line("%s settimeout %d result %d", p, o.Timeout, r)
		if t, err = wd.GetTimeout(); err != nil {
			fmt.Fprintf(stderr, "%s gettimeout error %d\n", p, errno(err))
			return 1
		}
		line("%s gettimeout %d", p, t)
	}
	rv := 0
	if err := wd.Keepalive(); err != nil {
		rv = -1
	}
	line("%s keepalive fd %d result %d", p, fd, rv)
	if !o.Force {
		return 0
	}
	line("waiting for watchdog to reset machine:")
	for i := 1; i <= t+4; i++ {
		if err := o.Clock.Sleep(ctx, time.Second); err != nil {
			return 1
		}
		if i <= t {
			line("%d", i)
		} else {
			line("%d %s failed to fire after timeout %d seconds", i, p, t)
		}
	}
	return 0
}
