// Package metrics is the daemon's Prometheus endpoint (ours: -M,
// metrics_address; docs/metrics.md), written with internal/promtext.
// Almost everything is read from the state the daemon keeps anyway when
// /metrics is scraped (Source); only the renewal outcomes
// (delta.Config.OnRenewal, Renewal) and the acquire/release replies
// (Started, Replied) are counted as they happen. The daemon only wires it.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/internal/promtext"
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// DefaultPort is the port of a metrics_address given without one.
const DefaultPort = "9310"

// namespace prefixes every metric name.
const namespace = "sanlock"

// latencyBuckets are the histogram buckets in seconds: renewal I/O takes
// milliseconds on a healthy disk and up to io_timeout on a sick one.
var latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40}

// ResolveAddress checks a metrics_address value and returns the
// address to listen on. A bare port ("9310", ":9310") or an empty host
// means the loopback address 127.0.0.1; "localhost" is loopback too. Any
// other host must be an IP literal: an address that is not loopback
// (including 0.0.0.0 and ::) is only ever used when written out this way.
// The port defaults to 9310 when the value has none.
func ResolveAddress(v string) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return "", errors.New("metrics_address: empty address")
	}
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		// No port: a bare port number, or a bare host.
		if _, perr := strconv.ParseUint(v, 10, 16); perr == nil {
			host, port = "", v
		} else {
			host, port = v, DefaultPort
			if strings.HasPrefix(v, "[") && strings.HasSuffix(v, "]") {
				host = v[1 : len(v)-1]
			}
		}
	}
	if port == "" {
		port = DefaultPort
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return "", fmt.Errorf("metrics_address %q: bad port %q (want 1-65535)", v, port)
	}
	switch host {
	case "", "localhost":
		host = "127.0.0.1"
	default:
		if net.ParseIP(host) == nil {
			return "", fmt.Errorf("metrics_address %q: host %q is not an IP address "+
				"(use 127.0.0.1, ::1, or the address of the interface to listen on)", v, host)
		}
	}
	return net.JoinHostPort(host, port), nil
}

// Source is what a scrape reads from the daemon; every field may be nil
// or false.
type Source struct {
	Lockspaces *manager.Lockspaces                   // lockspace and host gauges
	Resources  func() []wire.StateRecord             // held leases (status records)
	Clients    func() (registered, unregistered int) // open connections
	// Watchdog is set when the daemon uses the watchdog (-w 1): only then
	// is the watchdog expiry of each lockspace exported.
	Watchdog bool
}

// Endpoint is one running /metrics endpoint.
type Endpoint struct {
	src  Source
	http *http.Server
	ln   net.Listener

	renewRead   *promtext.HistogramVec // lockspace
	renewWrite  *promtext.HistogramVec // lockspace
	renewFail   *promtext.CounterVec   // lockspace, result
	ioTimeouts  *promtext.CounterVec   // lockspace
	reqDuration *promtext.HistogramVec // cmd
	reqResults  *promtext.CounterVec   // cmd, result

	starts sync.Map // *wire.Request -> time.Time, acquire/release in progress
}

// Start is Listen plus the daemon's log line: the error, a warning for a
// non-loopback address (no authentication), else the URL.
func Start(addr string, src Source, lg *zap.Logger) (*Endpoint, error) {
	m, err := Listen(addr, src)
	if err != nil {
		lg.Error(err.Error())
		return nil, err
	}
	if !m.Addr().IP.IsLoopback() {
		lg.Warn("metrics on a non-loopback address: no authentication", zap.Stringer("address", m.Addr()))
	} else {
		lg.Info("metrics", zap.String("url", "http://"+m.Addr().String()+"/metrics"))
	}
	return m, nil
}

// Listen resolves addr (ResolveAddress), listens on it and serves /metrics
// from src until Stop. The daemon logs the returned address.
func Listen(addr string, src Source) (*Endpoint, error) {
	addr, err := ResolveAddress(addr)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listen %s: %w", addr, err)
	}
	m := newEndpoint(src)
	m.ln = ln
	m.http = &http.Server{Handler: m.handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = m.http.Serve(ln) }()
	return m, nil
}

// handler serves /metrics and the index page at `/` (index.go).
func (m *Endpoint) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promtext.Handler(m.gather))
	mux.HandleFunc("/", m.index)
	return mux
}

// Addr is the address the endpoint listens on.
func (m *Endpoint) Addr() *net.TCPAddr { return m.ln.Addr().(*net.TCPAddr) }

// Stop shuts the endpoint down.
func (m *Endpoint) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = m.http.Shutdown(ctx)
}

func newEndpoint(src Source) *Endpoint {
	ns := namespace + "_"
	return &Endpoint{src: src,
		renewRead: promtext.NewHistogramVec(ns+"renewal_read_seconds",
			"Duration of the read of successful delta lease renewals.", latencyBuckets, "lockspace"),
		renewWrite: promtext.NewHistogramVec(ns+"renewal_write_seconds",
			"Duration of the write of successful delta lease renewals.", latencyBuckets, "lockspace"),
		renewFail: promtext.NewCounterVec(ns+"renewal_failures_total",
			"Failed delta lease renewals, by result code (-202: I/O timeout).", "lockspace", "result"),
		ioTimeouts: promtext.NewCounterVec(ns+"io_timeouts_total",
			"Delta lease renewals that failed because an I/O did not complete within io_timeout.", "lockspace"),
		reqDuration: promtext.NewHistogramVec(ns+"request_duration_seconds",
			"Time from receiving an acquire or release request to sending its result.", latencyBuckets, "cmd"),
		reqResults: promtext.NewCounterVec(ns+"requests_total",
			"Acquire and release requests answered, by result code (0: success).", "cmd", "result"),
	}
}

// gather returns every family of a scrape: the counted ones, the daemon's
// state, and the Go runtime's (go_goroutines, go_threads, ...: the fault
// battery bounds them).
func (m *Endpoint) gather() []promtext.Family {
	fams := []promtext.Family{m.renewRead.Family(), m.renewWrite.Family(), m.renewFail.Family(),
		m.ioTimeouts.Family(), m.reqDuration.Family(), m.reqResults.Family()}
	fams = append(fams, collectState(m.src)...)
	return append(fams, promtext.GoRuntime()...)
}

// Renewal counts one renewal outcome of lockspace space (the
// delta.Config.OnRenewal arguments). A nil Endpoint ignores it.
func (m *Endpoint) Renewal(space string, err error, readMs, writeMs int64) {
	if m == nil {
		return
	}
	if err == nil {
		if readMs >= 0 {
			m.renewRead.Observe(float64(readMs)/1000, space)
		}
		if writeMs >= 0 {
			m.renewWrite.Observe(float64(writeMs)/1000, space)
		}
		return
	}
	code := rescode.CodeOf(err)
	m.renewFail.Inc(space, strconv.Itoa(int(code)))
	if code == rescode.ErrAIOTimeout {
		m.ioTimeouts.Inc(space)
	}
}

// timedCmds are the commands whose latency and results are counted.
var timedCmds = map[wire.Cmd]string{wire.CmdAcquire: "acquire", wire.CmdRelease: "release"}

// Timed reports whether the latency and results of cmd are counted.
func Timed(cmd wire.Cmd) bool { _, ok := timedCmds[cmd]; return ok }

// Begin notes that the handling of q started when q is a timed request;
// Replied ends it. Call the returned function when its handler returns (it
// drops a start that no reply ended). A nil Endpoint ignores it.
func (m *Endpoint) Begin(q *wire.Request) (end func()) {
	if m == nil || !Timed(q.Header.Cmd) {
		return func() {}
	}
	m.starts.Store(q, time.Now())
	return func() { m.starts.Delete(q) }
}

// Replied counts the result reply of q if it is a timed request. A nil
// Endpoint ignores it.
func (m *Endpoint) Replied(q *wire.Request, result int32) {
	if m == nil {
		return
	}
	name, ok := timedCmds[q.Header.Cmd]
	if !ok {
		return
	}
	if t, ok := m.starts.LoadAndDelete(q); ok {
		m.reqDuration.Observe(time.Since(t.(time.Time)).Seconds(), name)
	}
	m.reqResults.Inc(name, strconv.Itoa(int(result)))
}

// The help texts of the state read at scrape time.
const (
	helpSinceRenewal = "Seconds since the last successful delta lease renewal (or the acquire) of this host."
	helpLeaseExpiry  = "Seconds until the delta lease of this host counts as lost: last successful renewal + 8 x io_timeout, " +
		"when the lockspace's lease holders are killed. Negative once passed."
	helpWatchdog = "Seconds until the watchdog expiry of this lockspace (the daemon uses the watchdog): " +
		"last successful renewal + 8 x io_timeout, after which wdmd lets the watchdog reset the host " +
		"(unless no lease is held). Negative once passed."
	helpHostAlive = "1 while this daemon sees the host of host_id renewing its delta lease in the lockspace (state LIVE), else 0."
	helpHostState = "The state this daemon gives the host of host_id in the lockspace " +
		"(host_status: UNKNOWN, FREE, LIVE, FAIL, DEAD): 1 for the current state, 0 for the others."
	helpHostSince = "Seconds since this daemon last saw the delta lease of the host of host_id change " +
		"(a renewal, or since it started watching), on this daemon's monotonic clock."
	helpIOTimeout  = "The io_timeout of this host in the lockspace."
	helpRenewFail  = "1 once the own-lease check has failed (the lease is considered lost), else 0."
	helpLastResult = "Result code of the last renewal attempt (1: success, as sanlock's SANLK_OK)."
	helpLockspaces = "Lockspaces by list: add (joining), spaces (joined), rem (leaving)."
	helpLeases     = "Resource leases held by local processes, by lockspace and mode (ex, sh); one per holder."
	helpClients    = "Open client connections to the daemon socket; registered ones are held by a process."
)

// gauge returns an empty gauge family.
func gauge(name, help string) promtext.Family {
	return promtext.Family{Name: namespace + "_" + name, Help: help, Type: promtext.Gauge}
}

// addGauge adds one series to f, labelled by name/value pairs.
func addGauge(f *promtext.Family, v float64, kv ...string) {
	ls := make([]promtext.Label, len(kv)/2)
	for i := range ls {
		ls[i] = promtext.Label{Name: kv[2*i], Value: kv[2*i+1]}
	}
	f.Series = append(f.Series, promtext.Series{Labels: ls, Value: v})
}

// collectState reads the daemon's state at scrape time.
func collectState(src Source) []promtext.Family {
	var fams []promtext.Family
	if src.Lockspaces != nil {
		fams = collectLockspaces(src.Lockspaces, src.Watchdog)
		fams = append(fams, collectHosts(src.Lockspaces)...)
	}

	held := map[[2]string]int{}
	if src.Resources != nil {
		for _, r := range src.Resources() {
			if r.Resource == nil || !strings.HasPrefix(r.Text, "list=held ") {
				continue
			}
			mode := "ex"
			if r.Resource.Flags&wire.ResShared != 0 {
				mode = "sh"
			}
			held[[2]string{r.Resource.LockspaceName, mode}]++
		}
	}
	leases := gauge("leases_held", helpLeases)
	for k, n := range held {
		addGauge(&leases, float64(n), "lockspace", k[0], "mode", k[1])
	}

	var reg, unreg int
	if src.Clients != nil {
		reg, unreg = src.Clients()
	}
	clients := gauge("clients_connected", helpClients)
	addGauge(&clients, float64(reg), "registered", "1")
	addGauge(&clients, float64(unreg), "registered", "0")
	return append(fams, leases, clients)
}

// collectLockspaces reports every lockspace from its published status;
// the watchdog expiry only when watchdog is set.
func collectLockspaces(m *manager.Lockspaces, watchdog bool) []promtext.Family {
	snaps := m.Snapshot()
	counts := map[string]int{}
	for _, sn := range snaps {
		counts[sn.List]++
	}
	lists := gauge("lockspaces", helpLockspaces)
	for _, l := range []string{"add", "spaces", "rem"} {
		addGauge(&lists, float64(counts[l]), "list", l)
	}

	ioTimeout := gauge("lockspace_io_timeout_seconds", helpIOTimeout)
	renewFail := gauge("lockspace_renewal_failed", helpRenewFail)
	lastResult := gauge("lockspace_renewal_last_result", helpLastResult)
	since := gauge("lockspace_seconds_since_renewal", helpSinceRenewal)
	leaseExpiry := gauge("lockspace_lease_expiry_seconds", helpLeaseExpiry)
	wdExpiry := gauge("lockspace_watchdog_expiry_seconds", helpWatchdog)
	now := m.Now().Seconds()
	for _, sn := range snaps {
		if sn.Run == nil || sn.List == "add" {
			continue
		}
		st := sn.Run.Status()
		name, id := sn.Lockspace.Name, strconv.FormatUint(sn.Lockspace.HostID, 10)
		addGauge(&ioTimeout, float64(sn.IOTimeout), "lockspace", name, "host_id", id)
		addGauge(&renewFail, float64(b2i(st.RenewFail)), "lockspace", name, "host_id", id)
		if st.RenewalLastAttempt != 0 {
			addGauge(&lastResult, float64(st.RenewalLastResult), "lockspace", name, "host_id", id)
		}
		last := st.RenewalLastSuccess
		if last == 0 {
			continue
		}
		addGauge(&since, now-float64(last), "lockspace", name, "host_id", id)
		expiry := float64(last) + float64(delta.IDRenewalFailSeconds(sn.IOTimeout))
		addGauge(&leaseExpiry, expiry-now, "lockspace", name, "host_id", id)
		if watchdog {
			addGauge(&wdExpiry, expiry-now, "lockspace", name, "host_id", id)
		}
	}
	return []promtext.Family{lists, ioTimeout, renewFail, lastResult, since, leaseExpiry, wdExpiry}
}

// hostStates are the states of sanlock_host_state, as host_status names them.
var hostStates = []delta.HostState{delta.HostUnknown, delta.HostFree, delta.HostLive, delta.HostFail, delta.HostDead}

// collectHosts reports the hosts of every joined lockspace as this
// daemon's host table sees them: the entries host_status lists, this
// host's own included. Here host_id is the id of the host a series is
// about.
func collectHosts(m *manager.Lockspaces) []promtext.Family {
	alive := gauge("host_alive", helpHostAlive)
	state := gauge("host_state", helpHostState)
	since := gauge("host_seconds_since_renewal", helpHostSince)
	now := m.Now().Seconds()
	for _, sn := range m.Snapshot() {
		if sn.Run == nil || sn.List == "add" {
			continue
		}
		name := sn.Lockspace.Name
		for _, h := range sn.Run.HostStatuses() {
			id := strconv.FormatUint(h.HostID, 10)
			st := sn.Run.HostState(h.HostID)
			addGauge(&alive, float64(b2i(st == delta.HostLive)), "lockspace", name, "host_id", id)
			for _, s := range hostStates {
				addGauge(&state, float64(b2i(st == s)), "lockspace", name, "host_id", id, "state", s.String())
			}
			if h.LastLive != 0 {
				addGauge(&since, max(now-float64(h.LastLive), 0), "lockspace", name, "host_id", id)
			}
		}
	}
	return []promtext.Family{alive, state, since}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
