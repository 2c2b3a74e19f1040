package cli

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
)

// EnvPprof is a hidden switch for benchmarks (cmd/slbench -pprof): when
// SANLOCK_PPROF=host:port names a loopback address, the daemon serves
// net/http/pprof there. It is not a sanlock variable and is off by default.
const EnvPprof = "SANLOCK_PPROF"

// startPprof serves the pprof handlers on $SANLOCK_PPROF when it is set to a
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
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go func() { _ = http.Serve(ln, mux) }()
}
