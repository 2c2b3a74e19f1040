// Command holder is the client process of the harness's exclusion tests:
// it registers with the sanlock daemon of $SANLOCK_RUN_DIR (C or ours) and
// loops acquire -> record -> release on one resource.
//
// Each successful acquisition appends one line to the log file (-log),
// written with a single write(2) after the release was sent:
//
//	h HOST PID MODE LVER START END
//
// MODE is ex or sh, LVER the lease version the daemon reports (inquire)
// after the acquire, START the CLOCK_MONOTONIC time in nanoseconds taken
// right after the acquire returned, END the time taken right before the
// release was sent. So [START, END] lies inside the real holding, and two
// records of one machine that overlap prove two holders at once.
//
// With -n 1 -hold D the holder acquires once and holds for D (the
// dead-owner tests use it with a long D and kill it). On exit (count or
// -duration reached, SIGTERM or SIGINT) it prints a one-line summary:
//
//	done acquired=N errors:acquire-243=COUNT,release-1=COUNT,...
//
// and exits 0, or 1 on a fatal error (lost daemon connection).
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/client"
)

func main() {
	var (
		host    = flag.String("host", "?", "host name written in records")
		ls      = flag.String("ls", "", "lockspace name")
		res     = flag.String("res", "", "resource name")
		path    = flag.String("path", "", "resource lease path")
		offset  = flag.Uint64("offset", 0, "resource lease offset")
		shared  = flag.Float64("shared", 0, "fraction of acquisitions made in shared mode (0..1)")
		logPath = flag.String("log", "", "record file (appended)")
		count   = flag.Int("n", 0, "stop after N acquisitions (0: no limit)")
		dur     = flag.Duration("duration", 0, "stop after this long (0: no limit)")
		hold    = flag.Duration("hold", 0, "minimum hold time")
		holdMax = flag.Duration("holdmax", time.Millisecond, "maximum hold time (uniform between -hold and this)")
		backoff = flag.Duration("backoff", 10*time.Millisecond, "maximum random sleep after a failed acquire")
		flags   = flag.Uint("flags", 0, "acquire cmd_flags (e.g. 8 = OWNER_NOWAIT)")
	)
	flag.Parse()
	if *ls == "" || *res == "" || *path == "" || *logPath == "" {
		fmt.Fprintln(os.Stderr, "holder: -ls, -res, -path and -log are required")
		os.Exit(2)
	}
	logf, err := os.OpenFile(*logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		fatal("open log: %v", err)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	var deadline <-chan time.Time
	if *dur > 0 {
		deadline = time.After(*dur)
	}

	cl, err := client.Dial(client.RunDir())
	if err != nil {
		fatal("dial: %v", err)
	}
	reg, err := cl.Register(context.Background())
	if err != nil {
		fatal("register: %v", err)
	}
	defer reg.Close()

	pid := os.Getpid()
	acquired := 0
	errs := map[string]int{}
	summary := func() {
		var parts []string
		keys := make([]string, 0, len(errs))
		for k := range errs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s=%d", k, errs[k]))
		}
		fmt.Printf("done acquired=%d errors:%s\n", acquired, strings.Join(parts, ","))
	}
	stopping := func() bool {
		select {
		case <-stop:
			return true
		case <-deadline:
			return true
		default:
			return false
		}
	}

	for (*count == 0 || acquired < *count) && !stopping() {
		r := client.Resource{LockspaceName: *ls, Name: *res,
			Disks: []client.Disk{{Path: *path, Offset: *offset}}}
		mode := "ex"
		if *shared > 0 && rand.Float64() < *shared {
			r.Flags |= client.ResShared
			mode = "sh"
		}
		if err := reg.Acquire(context.Background(), []client.Resource{r}, client.AcquireFlags(uint32(*flags)), nil); err != nil {
			code := client.ErrorCode(err)
			if code == 0 {
				fatal("acquire: %v", err)
			}
			errs[fmt.Sprintf("acquire%d", code)]++
			if *backoff > 0 {
				time.Sleep(rand.N(*backoff))
			}
			continue
		}
		start := monotonic()
		lver := uint64(0)
		if inq, err := reg.Inquire(context.Background()); err == nil {
			if rs, err := inq.Resources(); err == nil && len(rs) == 1 {
				lver = rs[0].LVer
			}
		} else if client.ErrorCode(err) == 0 {
			fatal("inquire: %v", err)
		}
		if *count == 1 && *hold > 0 {
			// One long hold (dead-owner tests): announce it now, as the
			// holder is expected to be killed.
			fmt.Printf("holding lver=%d start=%d\n", lver, start)
		}
		d := *hold
		if *holdMax > d {
			d += rand.N(*holdMax - d)
		}
		if d > 0 {
			select {
			case <-time.After(d):
			case s := <-stop:
				stop <- s
			}
		}
		end := monotonic()
		_, rerr := reg.Release(context.Background(), []client.Resource{{LockspaceName: *ls, Name: *res}}, 0)
		if _, err := fmt.Fprintf(logf, "h %s %d %s %d %d %d\n", *host, pid, mode, lver, start, end); err != nil {
			fatal("write log: %v", err)
		}
		acquired++
		if rerr != nil {
			code := client.ErrorCode(rerr)
			if code == 0 {
				fatal("release: %v", rerr)
			}
			errs[fmt.Sprintf("release%d", code)]++
		}
	}
	summary()
}

func monotonic() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		fatal("clock_gettime: %v", err)
	}
	return ts.Nano()
}

func fatal(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "holder: "+format+"\n", args...)
	os.Exit(1)
}
