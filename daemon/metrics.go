package daemon

import (
	"sync/atomic"

	"github.com/gosanlock/gosanlock/internal/metrics"
)

// The Prometheus endpoint (ours: -M, metrics_address; docs/metrics.md) is
// internal/metrics; the daemon starts it and feeds it (Renewal; Begin in
// Conn.dispatch, Replied in Conn.Reply).

// startMetrics starts the endpoint when metrics_address is set (after
// Start: logging is set up and the lock file held). stop shuts it down.
func (s *Server) startMetrics() (stop func(), err error) {
	if s.cfg.MetricsAddress == "" {
		return func() {}, nil
	}
	src := metrics.Source{Lockspaces: s.mgr.Lockspaces, Resources: s.mgr.Resources.StatusRecords, Clients: s.countClients,
		Watchdog: s.cfg.UseWatchdog}
	m, err := metrics.Start(s.cfg.MetricsAddress, src, s.lg)
	if err != nil {
		return nil, err
	}
	s.metrics.Store(m)
	return m.Stop, nil
}

// metricsOf returns the server's endpoint, nil when metrics are off.
func (s *Server) metricsOf() *metrics.Endpoint {
	if s == nil {
		return nil
	}
	return s.metrics.Load()
}

// metricsRef is the Server's field: the endpoint once started.
type metricsRef = atomic.Pointer[metrics.Endpoint]

// renewalHook returns the delta.Config.OnRenewal of lockspace space.
// It also calls Tuning.Settled once, at the lockspace's second renewal: by
// then the join (or the adoption at a reexec) is over and the renewal
// path has run.
func (s *Server) renewalHook(space string) func(error, int64, int64) {
	var n atomic.Int32
	return func(err error, readMs, writeMs int64) {
		s.metricsOf().Renewal(space, err, readMs, writeMs)
		if s != nil && s.deps.Tuning != nil && n.Load() < 2 && n.Add(1) == 2 {
			s.deps.Tuning.Settled()
		}
	}
}

// countClients counts the open connections, registered and not.
func (s *Server) countClients() (reg, unreg int) {
	for _, cn := range s.clients() {
		if cn.clientStatus().Registered {
			reg++
		} else {
			unreg++
		}
	}
	return reg, unreg
}
