package harness_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/internal/debtree"
	"github.com/gosanlock/gosanlock/testdisk/harness"
)

// versionsRun is a cluster of hosts of different sanlock versions on one
// lockspace, contending for one resource: first exclusive acquisitions
// only, then 70 % shared ones (docs/harness.md, "Mixed versions").
type versionsRun struct {
	prefix   string         // host name prefix; the lockspace is "ls"+prefix
	kinds    []harness.Kind // one host per kind, host ids 1, 2, ...
	initKind harness.Kind   // whose `direct init` writes the lease areas
	// delta and paxos are the on-disk versions the areas must have, at
	// the start and after every host used them.
	delta, paxos uint32
	exFor, shFor time.Duration // how long each phase's holders loop
	// refused are kinds that cannot read the areas: a host of each joins
	// after the others (host ids after theirs) and must be refused with
	// -224 without writing anything; it is then killed.
	refused []harness.Kind
}

// versionOf is the release each kind must report (VERSION command); ""
// for ours, which reports what it is built as.
var versionOf = map[harness.Kind]string{harness.C: "3.8.5", harness.C395: "3.9.5", harness.C511: "5.1.1"}

// treesFor returns the Debian trees the kinds need (debtree.Get skips the
// test when they cannot be had, or fails it under CI=true).
func treesFor(t *testing.T, kinds ...harness.Kind) map[harness.Kind]*debtree.Tree {
	t.Helper()
	trees := map[harness.Kind]*debtree.Tree{}
	for _, k := range kinds {
		switch k {
		case harness.C395:
			trees[k] = debtree.Get(t, "trixie")
		case harness.C511:
			trees[k] = debtree.Get(t, "sid")
		}
	}
	return trees
}

func (r versionsRun) run(t *testing.T) {
	needReal(t)
	all := append([]harness.Kind{r.initKind}, r.kinds...)
	c := harness.TestCluster(t, harness.Options{GoBinary: goSanlock,
		Trees: treesFor(t, all...), InitKind: r.initKind})
	ls := "ls" + r.prefix
	if err := c.InitLockspace("ls", ls, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.InitResource("res", ls, "r1", 8); err != nil {
		t.Fatal(err)
	}
	r.checkVersions(t, c, "after init")
	start := time.Now()
	hosts := addHosts(t, c, r.prefix, r.kinds, ls, "ls")
	joined := time.Since(start)
	for _, h := range hosts {
		v, _, err := h.Client().Version(context.Background())
		if err != nil {
			t.Fatalf("%s: VERSION: %v", h.Name, err)
		}
		got := fmt.Sprint(v>>24, ".", v>>16&0xff, ".", v>>8&0xff)
		t.Logf("%s: daemon version %s", h.Name, got)
		if want := versionOf[h.Kind]; want != "" && got != want {
			t.Errorf("%s: daemon reports version %s, want %s", h.Name, got, want)
		}
	}
	live := allLive(t, hosts, ls, 40*time.Second)
	t.Logf("joined in %v, every host saw every other LIVE %v later", joined.Round(time.Millisecond), live.Round(time.Millisecond))
	for i, k := range r.refused {
		id := uint64(len(r.kinds) + i + 1)
		h, err := c.AddHost(k, fmt.Sprintf("%s%dx%s", r.prefix, id, k))
		if err != nil {
			t.Fatal(err)
		}
		err = h.AddLockspace(ls, id, "ls", 1)
		if code := client.ErrorCode(err); code != -224 {
			t.Errorf("%s (%s) joining the lockspace: %v, want error -224", h.Name, k, err)
		} else {
			t.Logf("%s (%s) refused to join: %v", h.Name, k, err)
		}
		h.Kill()
	}

	ex := r.phase(t, hosts, ls, "ex", 0, r.exFor)
	// Shared holds last 5-30 ms, so that the C hosts' shared holdings,
	// which are few, overlap with others.
	sh := r.phase(t, hosts, ls, "sh", 0.7, r.shFor, "-hold", "5ms", "-holdmax", "30ms")

	hs := append(append([]harness.Holding(nil), ex...), sh...)
	vs := harness.Check(hs)
	for i, v := range vs {
		if i == 20 {
			t.Errorf("... more violations")
			break
		}
		t.Errorf("violation: %s", v)
	}
	cross := crossKindSharedOverlaps(hosts, sh)
	t.Logf("%d holdings, %d violations; lver %s; %d overlapping shared pairs, between hosts of different kinds: %s",
		len(hs), len(vs), lverRange(hs), harness.SharedOverlaps(hs), pairsString(cross))
	for i, a := range r.kinds {
		for _, b := range r.kinds[i+1:] {
			if cross[kindPair(a, b)] == 0 {
				t.Errorf("no shared holding of a %s host overlapped one of a %s host", a, b)
			}
		}
	}
	// The C hosts win few exclusive races against ours (5 to 32 in the
	// exclusive phase in the runs of docs/testing.md), so their exclusive
	// holdings are counted over both phases.
	for _, h := range hosts {
		if n := count(hs, h.Name, "ex"); n == 0 {
			t.Errorf("%s (%s) made no exclusive holding", h.Name, h.Kind)
		}
		if n := count(sh, h.Name, "sh"); n == 0 {
			t.Errorf("%s (%s) made no shared holding in the shared phase", h.Name, h.Kind)
		}
	}
	// Still all alive and LIVE to each other after the contention.
	allLive(t, hosts, ls, 10*time.Second)
	r.checkVersions(t, c, "after the holders")
	t.Logf("whole run %v", time.Since(start).Round(time.Millisecond))
}

// phase runs two holders per host for d with the given shared fraction
// (and more holder arguments) and returns their holdings.
func (r versionsRun) phase(t *testing.T, hosts []*harness.Host, ls, name string, shared float64, d time.Duration, more ...string) []harness.Holding {
	t.Helper()
	var logs, outs []string
	var procs []*harness.Proc
	start := time.Now()
	for _, h := range hosts {
		for k := 0; k < 2; k++ {
			pn := fmt.Sprintf("holder%s%d", name, k)
			log := filepath.Join(h.Dir, pn+".log")
			args := append([]string{holderBin, "-host", h.Name, "-ls", ls, "-res", "r1",
				"-path", h.Path("res"), "-log", log, "-duration", d.String(),
				"-shared", fmt.Sprint(shared)}, more...)
			p, out, err := h.StartProc(pn, args...)
			if err != nil {
				t.Fatal(err)
			}
			logs, outs, procs = append(logs, log), append(outs, out), append(procs, p)
		}
	}
	for i, p := range procs {
		if err := p.Wait(d + 30*time.Second); err != nil {
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
	t.Logf("phase %s: %s in %v (%.1f/s)", name, harness.Summary(hs), elapsed.Round(time.Millisecond),
		float64(len(hs))/elapsed.Seconds())
	return hs
}

// checkVersions reads the delta leases of every host id the run uses and
// the resource leader from the backing files and compares their versions
// with r's.
func (r versionsRun) checkVersions(t *testing.T, c *harness.Cluster, when string) {
	t.Helper()
	type area struct {
		file string
		off  int64
		want uint32
	}
	areas := []area{{"res", 0, r.paxos}}
	for i := range len(r.kinds) + len(r.refused) {
		areas = append(areas, area{"ls", int64(i) * 512, r.delta})
	}
	for _, a := range areas {
		l, err := c.ReadLeader(a.file, a.off)
		if err != nil {
			t.Errorf("%s: read the leader of %s at %d: %v", when, a.file, a.off, err)
			continue
		}
		if l.Version != a.want {
			t.Errorf("%s: %s at %d has version %#x, want %#x", when, a.file, a.off, l.Version, a.want)
		}
		if a.file == "ls" && a.off >= int64(len(r.kinds))*512 && (l.OwnerID != 0 || l.Timestamp != 0) {
			t.Errorf("%s: the delta lease at %d of a refused host has owner %d timestamp %d", when, a.off, l.OwnerID, l.Timestamp)
		}
		if a.file == "res" && when != "after init" {
			t.Logf("%s: resource leader version %#x lver %d owner %d", when, l.Version, l.Lver, l.OwnerID)
		}
	}
}

// allLive waits until every host's daemon reports every other host LIVE
// (get_hosts, what `sanlock client host_status` prints) and returns how
// long it took.
func allLive(t *testing.T, hosts []*harness.Host, ls string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(hosts)*len(hosts))
	for _, h := range hosts {
		for j := range hosts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := h.WaitHostState(ctx, ls, uint64(j+1), client.HostLive); err != nil {
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	return time.Since(start)
}

func count(hs []harness.Holding, host, mode string) int {
	n := 0
	for _, h := range hs {
		if h.Host == host && h.Mode == mode {
			n++
		}
	}
	return n
}

// lverRange is "first..last" of the exclusive holdings' lvers.
func lverRange(hs []harness.Holding) string {
	var lv []uint64
	for _, h := range hs {
		if h.Mode == "ex" {
			lv = append(lv, h.LVer)
		}
	}
	if len(lv) == 0 {
		return "-"
	}
	sort.Slice(lv, func(i, j int) bool { return lv[i] < lv[j] })
	return fmt.Sprintf("%d..%d", lv[0], lv[len(lv)-1])
}

// kindPair names a pair of kinds in either order: "c+go".
func kindPair(a, b harness.Kind) string {
	if a > b {
		a, b = b, a
	}
	return string(a) + "+" + string(b)
}

// pairsString prints counts by kind pair: "c+c395=241 c+go=372".
func pairsString(n map[string]int) string {
	var parts []string
	for k, v := range n {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// crossKindSharedOverlaps counts the pairs of shared holdings of hosts of
// different kinds that overlap (shared leases held at once by two
// versions), by pair of kinds (kindPair).
func crossKindSharedOverlaps(hosts []*harness.Host, hs []harness.Holding) map[string]int {
	kind := map[string]harness.Kind{}
	for _, h := range hosts {
		kind[h.Name] = h.Kind
	}
	var sh []harness.Holding
	for _, h := range hs {
		if h.Mode == "sh" {
			sh = append(sh, h)
		}
	}
	sort.Slice(sh, func(i, j int) bool { return sh[i].Start < sh[j].Start })
	n := map[string]int{}
	for i := range sh {
		for j := i + 1; j < len(sh) && sh[j].Start <= sh[i].End; j++ {
			if a, b := kind[sh[i].Host], kind[sh[j].Host]; a != b {
				n[kindPair(a, b)]++
			}
		}
	}
	return n
}

// TestMixedFourVersions: a sanlock 3.8.5, a 3.9.5, a 5.1.1 and a gosanlock
// host on one lockspace in the old formats (delta 3.4, paxos 6.4, written
// by 3.8.5's `direct init`), two holder processes per host on one
// resource: 20 s of exclusive acquisitions, then 15 s with 70 % shared.
// No two holdings may overlap unless both are shared, lver grows with
// every exclusive one, every host gets the lease in each mode, every host
// sees the three others LIVE before and after, and the areas keep their
// versions.
func TestMixedFourVersions(t *testing.T) {
	t.Parallel()
	versionsRun{prefix: "m", kinds: []harness.Kind{harness.C, harness.C395, harness.C511, harness.Go},
		initKind: harness.C, delta: 0x00030004, paxos: 0x00060004,
		exFor: 20 * time.Second, shFor: 15 * time.Second}.run(t)
}

// TestMixedNewFormat: a sanlock 5.1.1 host and a gosanlock host on a
// lockspace and resource that 5.1.1's `direct init` wrote in its default
// formats (delta 5.0, paxos 7.0), as TestMixedFourVersions. A 3.8.5 and
// a 3.9.5 host, which do not know these formats, are refused with -224
// when they try to join, and write nothing.
func TestMixedNewFormat(t *testing.T) {
	t.Parallel()
	versionsRun{prefix: "n", kinds: []harness.Kind{harness.C511, harness.Go},
		initKind: harness.C511, delta: 0x00050000, paxos: 0x00070000,
		exFor: 20 * time.Second, shFor: 15 * time.Second,
		refused: []harness.Kind{harness.C, harness.C395}}.run(t)
}

// TestTreeHostSettings: the sanlock.conf the harness binds into a tree
// host's namespace is the one its daemon reads: TreeSanlockConf by
// default (fire timeout 60, as 3.8.5's fixed value), HostOptions.SanlockConf
// when given. The daemon record of STATUS shows the values in force.
func TestTreeHostSettings(t *testing.T) {
	t.Parallel()
	needReal(t)
	c := harness.TestCluster(t, harness.Options{GoBinary: goSanlock,
		Trees: treesFor(t, harness.C395, harness.C511)})
	for _, tc := range []struct {
		kind       harness.Kind
		conf, want string
	}{
		{harness.C395, "", "watchdog_fire_timeout=60"},
		{harness.C511, "", "watchdog_fire_timeout=60"},
		{harness.C395, "watchdog_fire_timeout = 20\n", "watchdog_fire_timeout=20"},
		{harness.C511, "watchdog_fire_timeout = 20\n", "watchdog_fire_timeout=20"},
	} {
		name := fmt.Sprintf("s%s%d", tc.kind, len(tc.conf))
		h, err := c.AddHostWith(tc.kind, name, harness.HostOptions{SanlockConf: tc.conf})
		if err != nil {
			t.Fatal(err)
		}
		recs, err := h.Client().Status(context.Background(), 0)
		if err != nil || len(recs) == 0 {
			t.Fatalf("%s: STATUS: %v (%d records)", name, err, len(recs))
		}
		text := recs[0].Text
		for _, w := range []string{tc.want, "io_timeout=10", "our_host_name=" + name} {
			if !strings.Contains(" "+text+" ", " "+w+" ") {
				t.Errorf("%s (%s, conf %q): daemon record lacks %s: %s", name, tc.kind, tc.conf, w, text)
			}
		}
	}
}
