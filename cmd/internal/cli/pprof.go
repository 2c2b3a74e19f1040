package cli

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

// EnvPprof is a hidden switch for benchmarks (cmd/slbench -pprof): when
// SANLOCK_PPROF=host:port names a loopback address, the daemon serves
// profiles there. It is not a sanlock variable and is off by default.
//
// The handlers are a small subset of net/http/pprof's, on the same paths,
// written over runtime/pprof: linking net/http/pprof (and with it
// internal/profile) cost every daemon 0.8 MB of RSS for a switch that is
// off (docs/performance.md "Profiles over runtime/pprof").
const EnvPprof = "SANLOCK_PPROF"

// startPprof serves the profiles on $SANLOCK_PPROF when it is set to a
// loopback address, and removes the variable from the environment so that
// programs the daemon starts do not inherit it. Anything else is reported
// on stderr and ignored: the daemon runs as usual.
func startPprof(stderr io.Writer) {
	addr := os.Getenv(EnvPprof)
	if addr == "" {
		return
	}
	_ = os.Unsetenv(EnvPprof)
	host, _, err := net.SplitHostPort(addr)
	ip := net.ParseIP(host)
	if err != nil || ip == nil || !ip.IsLoopback() {
		fmt.Fprintf(stderr, "%s=%q ignored: want a loopback address such as 127.0.0.1:6060\n", EnvPprof, addr)
		return
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", EnvPprof, err)
		return
	}
	go func() { _ = http.Serve(ln, http.HandlerFunc(servePprof)) }()
}

// servePprof answers /debug/pprof/profile?seconds=N (CPU, default 30 s),
// /debug/pprof/NAME?debug=N&gc=N for the runtime's named profiles (heap,
// allocs, goroutine, block, mutex, threadcreate) and /debug/pprof/ (the
// list of names).
func servePprof(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, "/debug/pprof/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	switch name {
	case "":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "profile")
		for _, p := range pprof.Profiles() {
			fmt.Fprintln(w, p.Name())
		}
	case "profile":
		secs, err := strconv.Atoi(q.Get("seconds"))
		if err != nil || secs <= 0 {
			secs = 30
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		if err := pprof.StartCPUProfile(w); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		select {
		case <-time.After(time.Duration(secs) * time.Second):
		case <-r.Context().Done():
		}
		pprof.StopCPUProfile()
	default:
		p := pprof.Lookup(name)
		if p == nil {
			http.NotFound(w, r)
			return
		}
		if q.Get("gc") != "" && q.Get("gc") != "0" {
			runtime.GC()
		}
		debug, _ := strconv.Atoi(q.Get("debug"))
		if debug != 0 {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		} else {
			w.Header().Set("Content-Type", "application/octet-stream")
		}
		_ = p.WriteTo(w, debug)
	}
}
