package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// contribDir holds the alert rules and the dashboard.
const contribDir = "../contrib/monitoring"

// nopWatchdog is a watchdog session that accepts every call.
type nopWatchdog struct{}

func (nopWatchdog) Activate(uint64, uint64) error { return nil }
func (nopWatchdog) Renewed(uint64, uint64) error  { return nil }
func (nopWatchdog) Deactivate() error             { return nil }
func (nopWatchdog) Close() error                  { return nil }
func (nopWatchdog) Handover() (*os.File, string, bool, error) {
	return nil, "", false, errors.New("a test watchdog cannot be handed over")
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// getText returns the body of url; it fails t unless the status is want.
func getText(t *testing.T, url string, want int) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, want, resp.StatusCode, "GET %s: %s", url, body)
	return string(body)
}

// exportedNames are the metric names of a scrape: each family's name from
// its TYPE line, with the _bucket, _sum and _count series of histograms and
// summaries.
func exportedNames(text string) map[string]bool {
	names := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || f[0] != "#" || f[1] != "TYPE" {
			continue
		}
		names[f[2]] = true
		switch f[3] {
		case "histogram":
			names[f[2]+"_bucket"] = true
			fallthrough
		case "summary":
			names[f[2]+"_sum"], names[f[2]+"_count"] = true, true
		}
	}
	return names
}

// ruleExprs returns the expr values of a rules file: one-line values and
// block scalars (`expr: |` followed by more indented lines). It fails t
// unless every rule (alert: or record:) has one.
func ruleExprs(t *testing.T, text string) []string {
	t.Helper()
	var exprs []string
	rules := 0
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, "- alert:") || strings.HasPrefix(l, "- record:") {
			rules++
		}
		v, ok := strings.CutPrefix(l, "expr:")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if v == "|" || v == ">" {
			indent := len(lines[i]) - len(strings.TrimLeft(lines[i], " "))
			var b strings.Builder
			for i+1 < len(lines) && (strings.TrimSpace(lines[i+1]) == "" ||
				len(lines[i+1])-len(strings.TrimLeft(lines[i+1], " ")) > indent) {
				i++
				b.WriteString(lines[i] + "\n")
			}
			v = b.String()
		}
		exprs = append(exprs, v)
	}
	require.Equal(t, rules, len(exprs), "every rule has an expr")
	require.NotZero(t, rules)
	return exprs
}

// dashboardExprs returns the queries of a Grafana dashboard: every
// target's expr and every variable's query.
func dashboardExprs(t *testing.T, text string) []string {
	t.Helper()
	var d any
	require.NoError(t, json.Unmarshal([]byte(text), &d))
	var exprs []string
	var walk func(v any, key string)
	walk = func(v any, key string) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				walk(x, k)
			}
		case []any:
			for _, x := range v {
				walk(x, key)
			}
		case string:
			if key == "expr" || key == "query" || key == "definition" {
				exprs = append(exprs, v)
			}
		}
	}
	walk(d, "")
	require.NotEmpty(t, exprs)
	return exprs
}

// metricName matches the metric names a PromQL expression of the contrib
// files can use: the daemon's, the Go runtime's, and Prometheus' own up.
var metricName = regexp.MustCompile(`\b(?:sanlock_[a-z0-9_]+|go_[a-z0-9_]+|up)\b`)

// TestMetricsContribNames runs two daemons joined to one lockspace, the
// first with the watchdog (a test session) and a held lease, the second
// with -w 0, and scrapes both: every metric name of the alert rules and
// the dashboard in contrib/monitoring is exported, every sanlock_ family
// is used by them and documented in docs/metrics.md, each daemon sees the
// other host alive, the watchdog expiry is exported only with the
// watchdog, and `/` is the index page while other paths are 404.
func TestMetricsContribNames(t *testing.T) {
	t.Parallel()
	addrs := []string{freeAddr(t), freeAddr(t)}
	n := 0
	rc := newResCluster(t, 2, 1, manager.Setup{
		OpenWatchdog: func(string, uint64) (manager.WatchdogSession, error) { return nopWatchdog{}, nil },
	}, func(c *Config) {
		c.MetricsAddress = addrs[n]
		c.UseWatchdog = n == 0
		n++
	})
	for _, td := range rc.tds {
		stop, err := td.srv.startMetrics()
		require.NoError(t, err)
		t.Cleanup(stop)
	}
	ctx := context.Background()
	reg, err := rc.tds[0].cl.Register(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { reg.Close() })
	require.NoError(t, reg.Acquire(ctx, []wire.Resource{rc.res(0, 0)}, 0, nil))
	// A renewal failure as the lockspace's OnRenewal reports it, so that
	// the failure counters have a series.
	rc.tds[0].srv.metricsOf().Renewal("LS", rescode.ErrAIOTimeout, -1, -1)

	// Each daemon sees the other host LIVE once its lease changed twice.
	var scrapes [2]string
	for i, addr := range addrs {
		other := []string{"2", "1"}[i]
		require.Eventually(t, func() bool {
			scrapes[i] = getText(t, "http://"+addr+"/metrics", http.StatusOK)
			return strings.Contains(scrapes[i], `sanlock_host_alive{host_id="`+other+`",lockspace="LS"} 1`)
		}, 30*time.Second, 200*time.Millisecond, "daemon %d sees host_id %s alive", i+1, other)
		assert.Contains(t, scrapes[i], `sanlock_host_state{host_id="`+other+`",lockspace="LS",state="LIVE"} 1`)
		assert.Contains(t, scrapes[i], `sanlock_host_state{host_id="`+other+`",lockspace="LS",state="DEAD"} 0`)
		assert.Regexp(t, `sanlock_host_seconds_since_renewal\{host_id="`+other+`",lockspace="LS"\} [0-9]`, scrapes[i])
		assert.Regexp(t, `sanlock_lockspace_lease_expiry_seconds\{host_id="[12]",lockspace="LS"\} [0-9]`, scrapes[i])
	}
	assert.Contains(t, scrapes[0], "sanlock_lockspace_watchdog_expiry_seconds{")
	assert.NotContains(t, scrapes[1], "watchdog", "-w 0: no watchdog metrics")

	exported := exportedNames(scrapes[0])
	exported["up"] = true // Prometheus' own, per scrape target
	used := map[string]bool{}
	for _, file := range []string{"sanlock.rules.yml", "grafana-dashboard.json"} {
		b, err := os.ReadFile(filepath.Join(contribDir, file))
		require.NoError(t, err)
		exprs := dashboardExprs
		if strings.HasSuffix(file, ".yml") {
			exprs = ruleExprs
		}
		for _, e := range exprs(t, string(b)) {
			for _, name := range metricName.FindAllString(e, -1) {
				used[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")] = true
				assert.True(t, exported[name], "%s uses %s, which the daemon does not export: %s", file, name, e)
			}
		}
	}
	doc, err := os.ReadFile("../docs/metrics.md")
	require.NoError(t, err)
	for name := range exported {
		if !strings.HasPrefix(name, "sanlock_") || strings.HasSuffix(name, "_bucket") ||
			strings.HasSuffix(name, "_sum") || strings.HasSuffix(name, "_count") {
			continue
		}
		assert.True(t, used[name], "%s is in neither the rules nor the dashboard", name)
		assert.True(t, strings.Contains(string(doc), "`"+name), "docs/metrics.md documents %s", name)
	}

	// The index page lists what a scrape has; other paths stay 404.
	index := getText(t, "http://"+addrs[0]+"/", http.StatusOK)
	assert.Contains(t, index, `<a href="/metrics">`)
	assert.Contains(t, index, "sanlock_host_alive")
	assert.Contains(t, index, "Watchdog: in use")
	assert.Contains(t, getText(t, "http://"+addrs[1]+"/", http.StatusOK), "Watchdog: not in use")
	getText(t, "http://"+addrs[0]+"/nothing", http.StatusNotFound)
	getText(t, "http://"+addrs[0]+"/metricsx", http.StatusNotFound)
}
