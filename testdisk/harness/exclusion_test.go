package harness_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/testdisk/harness"
)

// envInt reads an integer knob from the environment (soak-style runs of
// the same tests use bigger numbers).
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// exclusionRun is one mixed-cluster exclusion scenario.
type exclusionRun struct {
	prefix         string  // host name prefix and lockspace name
	shared         float64 // fraction of shared-mode acquisitions
	holdersPerHost int
	target         int // acquisitions wanted in total
}

// run starts the hosts, joins them to one lockspace, runs the holders on
// one resource until target acquisitions are recorded, and checks the
// records.
func (r exclusionRun) run(t *testing.T) {
	c := newCluster(t)
	ls := "ls" + r.prefix
	if err := c.InitLockspace("ls", ls, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.InitResource("res", ls, "r1", 8); err != nil {
		t.Fatal(err)
	}
	kinds := hostKinds(t)
	hosts := addHosts(t, c, r.prefix, kinds, ls, "ls")

	// Each holder stops after its quota. The quotas let every host but one
	// reach the target: a C host loses most races against fast Go holders
	// (its acquire waits a second whenever it has not just seen the
	// owner's lease change), and under load it may get few holdings.
	nHolders := len(hosts) * r.holdersPerHost
	if len(hosts) > 1 {
		nHolders -= r.holdersPerHost
	}
	perHolder := (r.target + nHolders - 1) / nHolders
	var logs, outs []string
	var procs []*harness.Proc
	start := time.Now()
	for _, h := range hosts {
		for k := 0; k < r.holdersPerHost; k++ {
			name := fmt.Sprintf("holder%d", k)
			log := filepath.Join(h.Dir, name+".log")
			p, out, err := h.StartProc(name, holderBin, "-host", h.Name, "-ls", ls, "-res", "r1",
				"-path", h.Path("res"), "-log", log, "-n", strconv.Itoa(perHolder),
				"-duration", "150s", "-shared", fmt.Sprint(r.shared))
			if err != nil {
				t.Fatal(err)
			}
			logs, outs, procs = append(logs, log), append(outs, out), append(procs, p)
		}
	}
	for i, p := range procs {
		if err := p.Wait(170 * time.Second); err != nil {
			t.Errorf("%s: %v: %s", p.Name, err, holderSummary(t, outs[i]))
		}
	}
	elapsed := time.Since(start)
	for i, p := range procs {
		t.Logf("%s: %s", p.Name, holderSummary(t, outs[i]))
	}
	hs, err := harness.ReadHoldings(logs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kinds %v: %s in %v (%.0f/s), %d overlapping shared pairs", kinds, harness.Summary(hs),
		elapsed.Round(time.Millisecond), float64(len(hs))/elapsed.Seconds(), harness.SharedOverlaps(hs))
	for i, v := range harness.Check(hs) {
		if i == 20 {
			t.Errorf("... more violations")
			break
		}
		t.Errorf("violation: %s", v)
	}
	if len(hs) < r.target {
		t.Errorf("%d acquisitions recorded, want at least %d", len(hs), r.target)
	}
	perHost := map[string]int{}
	for _, h := range hs {
		perHost[h.Host]++
	}
	for _, h := range hosts {
		if perHost[h.Name] == 0 {
			t.Errorf("host %s (%s) never acquired", h.Name, h.Kind)
		}
	}
}

// TestMixedCluster: one C daemon and two of ours (or the kinds in
// $GOSANLOCK_HARNESS_KINDS) on one lockspace, two holder processes per host
// looping acquire -> record -> release on one resource.
//
//   - exclusive: no two holdings may overlap and lver must grow with every
//     acquisition (at least 2,000 acquisitions);
//   - shared: 70% shared-mode acquisitions; shared holdings may overlap each
//     other but never an exclusive one.
//
// The two run at the same time, in separate clusters (concurrent t.Run
// calls, so that they take one slot of -parallel).
func TestMixedCluster(t *testing.T) {
	t.Parallel()
	runs := map[string]exclusionRun{
		"exclusive": {prefix: "x", holdersPerHost: 2,
			target: envInt("GOSANLOCK_HARNESS_ACQUISITIONS", 2000)},
		"shared": {prefix: "s", shared: 0.7, holdersPerHost: 2,
			target: envInt("GOSANLOCK_HARNESS_SHARED_ACQUISITIONS", 600)},
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for name, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(name, r.run)
		}()
	}
}
