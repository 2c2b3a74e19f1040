package harness_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/testdisk/fusefault"
	"github.com/gosanlock/gosanlock/testdisk/harness"
)

// scrape is one /metrics text: series (as written, name and labels) to value.
type scrape map[string]float64

func getMetrics(t *testing.T, url string) scrape {
	t.Helper()
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %s", url, resp.Status)
	}
	s := scrape{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("scrape %s: bad line %q", url, line)
		}
		s[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	return s
}

// sum adds the series of metric name whose labels contain every one of
// labels (each `key="value"`); ok is false when there is none.
func (s scrape) sum(name string, labels ...string) (v float64, ok bool) {
	for k, x := range s {
		if k != name && !strings.HasPrefix(k, name+"{") {
			continue
		}
		all := true
		for _, l := range labels {
			all = all && strings.Contains(k, l)
		}
		if all {
			v, ok = v+x, true
		}
	}
	return v, ok
}

// freeLoopbackPort returns a TCP port that was free on 127.0.0.1 a moment ago.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestMetricsEndpoint starts our daemon with -M on a FUSE view, joins a
// lockspace with io_timeout 1, and scrapes /metrics: renewals fill the
// latency histograms, a holder's acquires show up as results and a held
// lease, and while the host's storage hangs the renewal failures and I/O
// timeouts count up and the lease expiry countdown runs down; it goes back
// up once the storage answers again. The daemon runs with -w 0, so no
// watchdog expiry is exported.
func TestMetricsEndpoint(t *testing.T) {
	t.Parallel()
	needReal(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freeLoopbackPort(t))
	c, err := harness.NewCluster(harness.Options{GoBinary: goSanlock, DaemonArgs: []string{"-M", addr}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.Keep()
			t.Logf("work directory kept: %s", c.Dir)
		}
		if err := c.Close(); err != nil {
			t.Errorf("close cluster: %v", err)
		}
	})
	if err := c.InitLockspace("ls", "mls", 1); err != nil {
		t.Fatal(err)
	}
	if err := c.InitResource("res", "mls", "r1", 8); err != nil {
		t.Fatal(err)
	}
	h, err := c.AddHost(harness.Go, "m1go")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.AddLockspace("mls", 1, "ls", 1); err != nil {
		t.Fatal(err)
	}
	url := "http://" + addr + "/metrics"
	const ls = `lockspace="mls"`

	// waitFor scrapes until cond holds or d passes (generous bounds only).
	waitFor := func(what string, d time.Duration, cond func(scrape) bool) scrape {
		t.Helper()
		end := time.Now().Add(d)
		for {
			s := getMetrics(t, url)
			if cond(s) {
				return s
			}
			if time.Now().After(end) {
				t.Fatalf("no %s within %v; last scrape:\n%v", what, d, s)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	// Renewals: every 2 s with io_timeout 1.
	s := waitFor("two renewals", 20*time.Second, func(s scrape) bool {
		n, _ := s.sum("sanlock_renewal_read_seconds_count", ls)
		w, _ := s.sum("sanlock_renewal_write_seconds_count", ls)
		return n >= 2 && w >= 2
	})
	for _, name := range []string{"sanlock_lockspace_seconds_since_renewal", "sanlock_lockspace_lease_expiry_seconds"} {
		if v, ok := s.sum(name, ls); !ok || v < -1 || v > 9 {
			t.Errorf("%s = %v (present %v), want within [0, 8]", name, v, ok)
		}
	}
	if _, ok := s.sum("sanlock_lockspace_watchdog_expiry_seconds"); ok {
		t.Errorf("sanlock_lockspace_watchdog_expiry_seconds exported under -w 0")
	}
	if v, _ := s.sum("sanlock_lockspaces", `list="spaces"`); v != 1 {
		t.Errorf("sanlock_lockspaces{list=spaces} = %v, want 1", v)
	}

	// A holder: three exclusive acquisitions held 1.5 s each.
	p, out, err := h.StartProc("holder0", holderBin, "-host", h.Name, "-ls", "mls", "-res", "r1",
		"-path", h.Path("res"), "-log", filepath.Join(h.Dir, "holder0.log"), "-n", "3",
		"-hold", "1500ms", "-holdmax", "1500ms")
	if err != nil {
		t.Fatal(err)
	}
	waitFor("held lease", 15*time.Second, func(s scrape) bool {
		v, _ := s.sum("sanlock_leases_held", ls, `mode="ex"`)
		r, _ := s.sum("sanlock_clients_connected", `registered="1"`)
		return v == 1 && r >= 1
	})
	if err := p.Wait(30 * time.Second); err != nil {
		t.Fatalf("holder: %v: %s", err, holderSummary(t, out))
	}
	s = getMetrics(t, url)
	for _, cmd := range []string{"acquire", "release"} {
		if v, _ := s.sum("sanlock_requests_total", `cmd="`+cmd+`"`, `result="0"`); v < 3 {
			t.Errorf("sanlock_requests_total{cmd=%s,result=0} = %v, want >= 3", cmd, v)
		}
		if v, _ := s.sum("sanlock_request_duration_seconds_count", `cmd="`+cmd+`"`); v < 3 {
			t.Errorf("sanlock_request_duration_seconds_count{cmd=%s} = %v, want >= 3", cmd, v)
		}
	}
	if v, ok := s.sum("sanlock_leases_held", ls); ok && v != 0 {
		t.Errorf("sanlock_leases_held = %v after the holder ended, want 0", v)
	}
	if v, _ := s.sum("sanlock_renewal_failures_total", ls); v != 0 {
		t.Errorf("renewal failures before the fault: %v", v)
	}

	// Storage fault: every I/O of the host hangs, so renewals time out
	// (-202). Stay well below 8 x io_timeout, when the lease would be lost.
	h.SetFault(fusefault.Fault{Mode: fusefault.Hang})
	s = waitFor("renewal failure", 6*time.Second, func(s scrape) bool {
		f, _ := s.sum("sanlock_renewal_failures_total", ls, `result="-202"`)
		return f >= 1
	})
	if v, _ := s.sum("sanlock_io_timeouts_total", ls); v < 1 {
		t.Errorf("sanlock_io_timeouts_total = %v during a hang, want >= 1", v)
	}
	e1, _ := s.sum("sanlock_lockspace_lease_expiry_seconds", ls)
	a1, _ := s.sum("sanlock_lockspace_seconds_since_renewal", ls)
	s = waitFor("lease expiry countdown", 5*time.Second, func(s scrape) bool {
		e, _ := s.sum("sanlock_lockspace_lease_expiry_seconds", ls)
		a, _ := s.sum("sanlock_lockspace_seconds_since_renewal", ls)
		return e <= e1-1 && a >= a1+1
	})
	e2, _ := s.sum("sanlock_lockspace_lease_expiry_seconds", ls)
	t.Logf("during the hang: lease expiry %.1f s -> %.1f s", e1, e2)

	// Storage back: renewals succeed again and the countdown goes back up.
	h.SetFault(fusefault.Fault{})
	waitFor("recovered countdown", 10*time.Second, func(s scrape) bool {
		e, _ := s.sum("sanlock_lockspace_lease_expiry_seconds", ls)
		return e > e2+1
	})
}
