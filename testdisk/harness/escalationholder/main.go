// Command escalationholder is the lease holder of the escalation tests
// (testdisk/harness/escalation_test.go). It registers with the daemon of
// $SANLOCK_RUN_DIR, acquires one exclusive resource, and then reacts to
// the daemon's recovery escalation according to -mode:
//
//	notice       client.Reg.WatchRevocations (a kill program sending SIGUSR1);
//	             exits 0 on the first notice
//	term         exits 0 on SIGTERM (no kill program)
//	ignore-term  ignores SIGTERM; dies to SIGKILL
//	immortal     RESTRICT_SIGKILL (the daemon replaces SIGKILL by SIGTERM)
//	             and ignores SIGTERM: only a host reset ends it
//
// Every line it prints on stdout ends with the CLOCK_MONOTONIC time in
// nanoseconds at which the event was seen:
//
//	holding lver=N t=NS
//	notice sig=N t=NS        (mode notice: 10 = SIGUSR1 from the kill program)
//	sigterm count=N t=NS     (the other modes)
//
// The holder exits without releasing (the daemon sees its connection end).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/client"
)

func main() {
	var (
		ls   = flag.String("ls", "", "lockspace name")
		res  = flag.String("res", "", "resource name")
		path = flag.String("path", "", "resource lease path")
		mode = flag.String("mode", "term", "notice, term, ignore-term or immortal")
	)
	flag.Parse()
	if *ls == "" || *res == "" || *path == "" {
		fatal("-ls, -res and -path are required")
	}
	switch *mode {
	case "notice", "term", "ignore-term", "immortal":
	default:
		fatal("unknown -mode %q", *mode)
	}
	cl, err := client.Dial(client.RunDir())
	if err != nil {
		fatal("dial: %v", err)
	}
	reg, err := cl.Register(context.Background())
	if err != nil {
		fatal("register: %v", err)
	}
	var notices <-chan client.Revocation
	terms := make(chan os.Signal, 16)
	switch *mode {
	case "notice":
		if notices, _, err = reg.WatchRevocations(context.Background()); err != nil {
			fatal("watch revocations: %v", err)
		}
	case "immortal":
		if err := reg.Restrict(context.Background(), client.RestrictSigkill); err != nil {
			fatal("restrict: %v", err)
		}
		fallthrough
	default:
		signal.Notify(terms, syscall.SIGTERM)
	}
	r := client.Resource{LockspaceName: *ls, Name: *res, Disks: []client.Disk{{Path: *path}}}
	if err := reg.Acquire(context.Background(), []client.Resource{r}, 0, nil); err != nil {
		fatal("acquire: %v", err)
	}
	lver := uint64(0)
	if inq, err := reg.Inquire(context.Background()); err == nil {
		if rs, err := inq.Resources(); err == nil && len(rs) == 1 {
			lver = rs[0].LVer
		}
	}
	fmt.Printf("holding lver=%d t=%d\n", lver, monotonic())
	count := 0
	for {
		select {
		case n := <-notices:
			sig, _ := n.Signal.(syscall.Signal)
			fmt.Printf("notice sig=%d t=%d\n", int(sig), monotonic())
			os.Exit(0)
		case <-terms:
			count++
			fmt.Printf("sigterm count=%d t=%d\n", count, monotonic())
			if *mode == "term" {
				os.Exit(0)
			}
		}
	}
}

func monotonic() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		fatal("clock_gettime: %v", err)
	}
	return ts.Nano()
}

func fatal(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "escalationholder: "+format+"\n", args...)
	os.Exit(1)
}
