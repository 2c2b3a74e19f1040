package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// The Prometheus endpoint (ours: -M, metrics_address; docs/metrics.md).
// Almost everything is read from the state the daemon keeps anyway when
// /metrics is scraped; only the renewal outcomes (delta.Config.OnRenewal)
// and the acquire/release replies (Conn.Reply) are counted as they happen.

// DefaultMetricsPort is the port of a metrics_address given without one.
const DefaultMetricsPort = "9310"

// metricsNamespace prefixes every metric name.
const metricsNamespace = "sanlock"

// latencyBuckets are the histogram buckets in seconds: renewal I/O takes
// milliseconds on a healthy disk and up to io_timeout on a sick one.
var latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40}

// ResolveMetricsAddress checks a metrics_address value and returns the
// address to listen on. A bare port ("9310", ":9310") or an empty host
// means the loopback address 127.0.0.1; "localhost" is loopback too. Any
// other host must be an IP literal: an address that is not loopback
// (including 0.0.0.0 and ::) is only ever used when written out this way.
// The port defaults to 9310 when the value has none.
func ResolveMetricsAddress(v string) (string, error) {
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
			host, port = v, DefaultMetricsPort
			if strings.HasPrefix(v, "[") && strings.HasSuffix(v, "]") {
				host = v[1 : len(v)-1]
			}
		}
	}
	if port == "" {
		port = DefaultMetricsPort
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

// metrics is the endpoint of one Server.
type metrics struct {
	srv  *Server
	reg  *prometheus.Registry
	http *http.Server
	ln   net.Listener

	renewRead   *prometheus.HistogramVec // lockspace
	renewWrite  *prometheus.HistogramVec // lockspace
	renewFail   *prometheus.CounterVec   // lockspace, result
	ioTimeouts  *prometheus.CounterVec   // lockspace
	reqDuration *prometheus.HistogramVec // cmd
	reqResults  *prometheus.CounterVec   // cmd, result

	starts sync.Map // *wire.Request -> time.Time, acquire/release in progress
}

// startMetrics starts the endpoint when metrics_address is set (after
// Start: logging is set up and the lock file held). stop shuts it down.
func (s *Server) startMetrics() (stop func(), err error) {
	if s.cfg.MetricsAddress == "" {
		return func() {}, nil
	}
	addr, err := ResolveMetricsAddress(s.cfg.MetricsAddress)
	if err != nil {
		s.lg.Error(err.Error())
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		err = fmt.Errorf("metrics listen %s: %w", addr, err)
		s.lg.Error(err.Error())
		return nil, err
	}
	m := newMetrics(s)
	m.ln = ln
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	m.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	m.wrapHandlers()
	s.metrics.p.Store(m)
	if !ln.Addr().(*net.TCPAddr).IP.IsLoopback() {
		s.lg.Warn(fmt.Sprintf("metrics on non-loopback address %s: no authentication", ln.Addr()))
	} else {
		s.lg.Info(fmt.Sprintf("metrics on http://%s/metrics", ln.Addr()))
	}
	go func() { _ = m.http.Serve(ln) }()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = m.http.Shutdown(ctx)
	}, nil
}

func newMetrics(s *Server) *metrics {
	m := &metrics{srv: s, reg: prometheus.NewRegistry()}
	ns := metricsNamespace
	m.renewRead = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns,
		Name:    "renewal_read_seconds",
		Help:    "Duration of the read of successful delta lease renewals.",
		Buckets: latencyBuckets}, []string{"lockspace"})
	m.renewWrite = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns,
		Name:    "renewal_write_seconds",
		Help:    "Duration of the write of successful delta lease renewals.",
		Buckets: latencyBuckets}, []string{"lockspace"})
	m.renewFail = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns,
		Name: "renewal_failures_total",
		Help: "Failed delta lease renewals, by result code (-202: I/O timeout)."}, []string{"lockspace", "result"})
	m.ioTimeouts = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns,
		Name: "io_timeouts_total",
		Help: "Delta lease renewals that failed because an I/O did not complete within io_timeout."},
		[]string{"lockspace"})
	m.reqDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns,
		Name:    "request_duration_seconds",
		Help:    "Time from receiving an acquire or release request to sending its result.",
		Buckets: latencyBuckets}, []string{"cmd"})
	m.reqResults = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns,
		Name: "requests_total",
		Help: "Acquire and release requests answered, by result code (0: success)."}, []string{"cmd", "result"})
	m.reg.MustRegister(m.renewRead, m.renewWrite, m.renewFail, m.ioTimeouts, m.reqDuration, m.reqResults,
		stateCollector{s}, collectors.NewGoCollector()) // go_goroutines, go_threads, ...: the fault battery bounds them
	return m
}

// metricsOf returns the server's endpoint, nil when metrics are off.
func (s *Server) metricsOf() *metrics {
	if s == nil {
		return nil
	}
	return s.metrics.p.Load()
}

// metricsRef is the Server's field: the endpoint once started.
type metricsRef struct{ p atomic.Pointer[metrics] }

// renewalHook returns the delta.Config.OnRenewal of lockspace space.
func (s *Server) renewalHook(space string) func(error, int64, int64) {
	return func(err error, readMs, writeMs int64) {
		mt := s.metricsOf()
		if mt == nil {
			return
		}
		if err == nil {
			if readMs >= 0 {
				mt.renewRead.WithLabelValues(space).Observe(float64(readMs) / 1000)
			}
			if writeMs >= 0 {
				mt.renewWrite.WithLabelValues(space).Observe(float64(writeMs) / 1000)
			}
			return
		}
		code := rescode.CodeOf(err)
		mt.renewFail.WithLabelValues(space, strconv.Itoa(int(code))).Inc()
		if code == rescode.ErrAIOTimeout {
			mt.ioTimeouts.WithLabelValues(space).Inc()
		}
	}
}

// timedCmds are the commands whose latency and results are counted.
var timedCmds = map[wire.Cmd]string{wire.CmdAcquire: "acquire", wire.CmdRelease: "release"}

// wrapHandlers makes the acquire and release handlers note when a request
// started; Conn.Reply then calls replied.
func (m *metrics) wrapHandlers() {
	s := m.srv
	s.hmu.Lock()
	defer s.hmu.Unlock()
	for cmd := range timedCmds {
		r, ok := s.handlers[cmd]
		if !ok {
			continue
		}
		h := r.h
		r.h = func(ctx context.Context, c *Conn, q *wire.Request) error {
			m.starts.Store(q, time.Now())
			defer m.starts.Delete(q)
			return h(ctx, c, q)
		}
		s.handlers[cmd] = r
	}
}

// replied counts the result reply of q if it is a timed request.
func (m *metrics) replied(q *wire.Request, result int32) {
	if m == nil {
		return
	}
	name, ok := timedCmds[q.Header.Cmd]
	if !ok {
		return
	}
	if t, ok := m.starts.LoadAndDelete(q); ok {
		m.reqDuration.WithLabelValues(name).Observe(time.Since(t.(time.Time)).Seconds())
	}
	m.reqResults.WithLabelValues(name, strconv.Itoa(int(result))).Inc()
}

// stateCollector reads the daemon's state at scrape time.
type stateCollector struct{ s *Server }

var (
	descSinceRenewal = prometheus.NewDesc(metricsNamespace+"_lockspace_seconds_since_renewal",
		"Seconds since the last successful delta lease renewal (or the acquire) of this host.",
		[]string{"lockspace", "host_id"}, nil)
	descWatchdog = prometheus.NewDesc(metricsNamespace+"_lockspace_watchdog_expiry_seconds",
		"Seconds until the watchdog expiry of this lockspace: last successful renewal + 8 x io_timeout, "+
			"after which wdmd lets the watchdog reset the host (unless no lease is held). Negative once passed.",
		[]string{"lockspace", "host_id"}, nil)
	descIOTimeout = prometheus.NewDesc(metricsNamespace+"_lockspace_io_timeout_seconds",
		"The io_timeout of this host in the lockspace.", []string{"lockspace", "host_id"}, nil)
	descRenewFail = prometheus.NewDesc(metricsNamespace+"_lockspace_renewal_failed",
		"1 once the own-lease check has failed (the lease is considered lost), else 0.",
		[]string{"lockspace", "host_id"}, nil)
	descLastResult = prometheus.NewDesc(metricsNamespace+"_lockspace_renewal_last_result",
		"Result code of the last renewal attempt (1: success, as sanlock's SANLK_OK).",
		[]string{"lockspace", "host_id"}, nil)
	descLockspaces = prometheus.NewDesc(metricsNamespace+"_lockspaces",
		"Lockspaces by list: add (joining), spaces (joined), rem (leaving).", []string{"list"}, nil)
	descLeases = prometheus.NewDesc(metricsNamespace+"_leases_held",
		"Resource leases held by local processes, by lockspace and mode (ex, sh); one per holder.",
		[]string{"lockspace", "mode"}, nil)
	descClients = prometheus.NewDesc(metricsNamespace+"_clients_connected",
		"Open client connections to the daemon socket; registered ones are held by a process.",
		[]string{"registered"}, nil)
)

func (stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSinceRenewal, descWatchdog, descIOTimeout, descRenewFail,
		descLastResult, descLockspaces, descLeases, descClients} {
		ch <- d
	}
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	if s.deps.Manager != nil {
		collectLockspaces(s.deps.Manager.Lockspaces, ch)
	}

	held := map[[2]string]int{}
	for _, r := range s.deps.Resources.StatusRecords() {
		if r.Resource == nil || !strings.HasPrefix(r.Text, "list=held ") {
			continue
		}
		mode := "ex"
		if r.Resource.Flags&wire.ResShared != 0 {
			mode = "sh"
		}
		held[[2]string{r.Resource.LockspaceName, mode}]++
	}
	for k, n := range held {
		ch <- prometheus.MustNewConstMetric(descLeases, prometheus.GaugeValue, float64(n), k[0], k[1])
	}

	var reg, unreg int
	for _, cn := range s.clients() {
		if cn.Registered() {
			reg++
		} else {
			unreg++
		}
	}
	ch <- prometheus.MustNewConstMetric(descClients, prometheus.GaugeValue, float64(reg), "1")
	ch <- prometheus.MustNewConstMetric(descClients, prometheus.GaugeValue, float64(unreg), "0")
}

// collectLockspaces reports every lockspace from its published status.
func collectLockspaces(m *manager.Lockspaces, ch chan<- prometheus.Metric) {
	snaps := m.Snapshot()
	counts := map[string]int{}
	for _, sn := range snaps {
		counts[sn.List]++
	}
	for _, l := range []string{"add", "spaces", "rem"} {
		ch <- prometheus.MustNewConstMetric(descLockspaces, prometheus.GaugeValue, float64(counts[l]), l)
	}

	now := m.Now().Seconds()
	for _, sn := range snaps {
		if sn.Run == nil || sn.List == "add" {
			continue
		}
		st := sn.Run.Status()
		name, id := sn.Lockspace.Name, strconv.FormatUint(sn.Lockspace.HostID, 10)
		ch <- prometheus.MustNewConstMetric(descIOTimeout, prometheus.GaugeValue, float64(sn.IOTimeout), name, id)
		ch <- prometheus.MustNewConstMetric(descRenewFail, prometheus.GaugeValue, float64(b2i(st.RenewFail)), name, id)
		if st.RenewalLastAttempt != 0 {
			ch <- prometheus.MustNewConstMetric(descLastResult, prometheus.GaugeValue,
				float64(st.RenewalLastResult), name, id)
		}
		last := st.RenewalLastSuccess
		if last == 0 {
			continue
		}
		ch <- prometheus.MustNewConstMetric(descSinceRenewal, prometheus.GaugeValue, now-float64(last), name, id)
		expiry := float64(last) + float64(delta.IDRenewalFailSeconds(sn.IOTimeout))
		ch <- prometheus.MustNewConstMetric(descWatchdog, prometheus.GaugeValue, expiry-now, name, id)
	}
}
