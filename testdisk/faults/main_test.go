// Package faults_test is the fault battery (`make faults`, docs/reliability.md):
// real daemons (ours and, side by side where it can run the same case,
// sanlock 3.8.5) on the FUSE fault layer of testdisk/harness, each test
// asserting what the daemon promises and printing its figures.
//
// By default (`go test ./...`, `make test`) every test runs a short
// version. GOSANLOCK_FAULTS=full (`make faults`) runs the full battery.
// Everything needs root (FUSE mounts); CI runs as root.
package faults_test

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/testdisk/harness"
)

// Binaries built once by TestMain.
var (
	goSanlock string // our cmd/sanlock
	escHolder string // testdisk/harness/escalationholder
	loopHold  string // testdisk/harness/holder
	buildErr  error
)

func holderBin() string { return loopHold }

// parallelTests is how many parallel tests the short battery runs at once
// unless -test.parallel is given: its four parallel tests (storage
// faults, hangs, late release, many leases) mostly wait on timers and hung
// storage, and with the default (GOMAXPROCS, 2 in CI) the third waited for
// the first to end (18-21 s more wall time).
const parallelTests = 4

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set && !full() { // the full battery keeps the default: its figures are cleaner
		_ = flag.Set("test.parallel", strconv.Itoa(max(parallelTests, runtime.GOMAXPROCS(0))))
	}
	code := func() int {
		dir, err := os.MkdirTemp("", "faults-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		if goSanlock, loopHold, buildErr = harness.Build(dir); buildErr == nil {
			_, escHolder, buildErr = harness.BuildEscalation(dir)
		}
		return m.Run()
	}()
	os.Exit(code)
}

// full reports whether the full battery runs (GOSANLOCK_FAULTS=full).
func full() bool { return os.Getenv("GOSANLOCK_FAULTS") == "full" }

// pick returns short or long.
func pick[T any](short, long T) T {
	if full() {
		return long
	}
	return short
}

// needReal skips when the machine cannot run real daemons on FUSE
// (harness.NeedReal).
func needReal(t *testing.T) { harness.NeedReal(t, "the fault battery", buildErr) }

// newCluster makes a cluster closed at cleanup (harness.TestCluster).
func newCluster(t *testing.T, daemonArgs ...string) *harness.Cluster {
	t.Helper()
	needReal(t)
	return harness.TestCluster(t, harness.Options{GoBinary: goSanlock, DaemonArgs: daemonArgs})
}

// kinds returns the daemon kinds a side-by-side test runs: ours always,
// sanlock 3.8.5 too in the full battery (or when withC).
func kinds(withC bool) []harness.Kind {
	if full() || withC {
		return []harness.Kind{harness.Go, harness.C}
	}
	return []harness.Kind{harness.Go}
}

// procStats is what the battery watches of a daemon process.
type procStats struct {
	Threads int
	FDs     int
	RSSKiB  int
	// Goroutines is go_goroutines of our daemon's /metrics (-M), -1 when
	// not scraped (sanlock 3.8.5, or no -M) or the scrape failed.
	Goroutines int
}

func (s procStats) String() string {
	g := ""
	if s.Goroutines >= 0 {
		g = fmt.Sprintf(" goroutines %d", s.Goroutines)
	}
	return fmt.Sprintf("threads %d fds %d rss %.1f MB%s", s.Threads, s.FDs, float64(s.RSSKiB)/1024, g)
}

// metricsArgs returns the daemon arguments that open our daemon's metrics
// endpoint on a free loopback port, and the endpoint's URL ("" and no
// arguments for sanlock 3.8.5).
func metricsArgs(t *testing.T, kind harness.Kind) ([]string, string) {
	t.Helper()
	if kind != harness.Go {
		return nil, ""
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return []string{"-M", addr}, "http://" + addr + "/metrics"
}

// metricsClient scrapes without keep-alive: no connection of ours stays
// open in the daemon between samples.
var metricsClient = &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// goroutines scrapes go_goroutines from url (-1 when url is "" or the
// scrape fails).
func goroutines(url string) int {
	if url == "" {
		return -1
	}
	resp, err := metricsClient.Get(url)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				return int(f)
			}
		}
	}
	return -1
}

// readStatsM is readStats plus the goroutines of our daemon's /metrics.
func readStatsM(pid int, url string) (procStats, error) {
	s, err := readStats(pid)
	s.Goroutines = goroutines(url)
	return s, err
}

// readStats reads /proc/PID: Threads and VmRSS from status, and the
// number of open descriptors.
func readStats(pid int) (procStats, error) {
	s := procStats{Goroutines: -1}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "Threads:":
			s.Threads, _ = strconv.Atoi(f[1])
		case "VmRSS:":
			s.RSSKiB, _ = strconv.Atoi(f[1])
		}
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, err
	}
	s.FDs = len(ents)
	return s, nil
}

// sampler records the peak of a process's stats until stopped.
type sampler struct {
	mu    sync.Mutex
	peak  procStats
	last  procStats
	n     int
	stop  chan struct{}
	done  chan struct{}
	every time.Duration
	// scrapes and scrapeFails count the /metrics scrapes (goroutines).
	scrapes, scrapeFails int
}

func startSampler(pid int, every time.Duration) *sampler {
	return startSamplerM(pid, every, "")
}

// startSamplerM also samples go_goroutines from our daemon's /metrics at
// url (metricsArgs), in its own loop: a slow scrape delays no /proc sample.
func startSamplerM(pid int, every time.Duration, url string) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{}), every: every}
	s.peak.Goroutines = -1
	var wg sync.WaitGroup
	if url != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				g := goroutines(url)
				s.mu.Lock()
				s.scrapes++
				if g < 0 {
					s.scrapeFails++
				}
				s.peak.Goroutines = max(s.peak.Goroutines, g)
				s.mu.Unlock()
				select {
				case <-s.stop:
					return
				case <-time.After(max(every, 500*time.Millisecond)): // a scrape costs the daemon more than /proc
				}
			}
		}()
	}
	go func() {
		defer close(s.done)
		defer wg.Wait()
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			if st, err := readStats(pid); err == nil {
				s.mu.Lock()
				s.last = st
				s.n++
				s.peak.Threads = max(s.peak.Threads, st.Threads)
				s.peak.FDs = max(s.peak.FDs, st.FDs)
				s.peak.RSSKiB = max(s.peak.RSSKiB, st.RSSKiB)
				s.mu.Unlock()
			}
			select {
			case <-s.stop:
				return
			case <-tk.C:
			}
		}
	}()
	return s
}

// Stop ends the sampling and returns the peak.
func (s *sampler) Stop() procStats {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// Scrapes returns how many /metrics scrapes were made and how many failed.
func (s *sampler) Scrapes() (n, failed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scrapes, s.scrapeFails
}

// Peak returns the peak so far.
func (s *sampler) Peak() procStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// monoNow is CLOCK_MONOTONIC in seconds, the clock of the daemons'
// timestamps.
func monoNow() float64 {
	return float64(monoNanos()) / 1e9
}
