package sim

import (
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/paxos"
)

var (
	flagSeed  = flag.Uint64("sim.seed", 1, "first seed (TestReplay: the seed to replay)")
	flagSeeds = flag.Int("sim.seeds", 0, "TestSimSeeds: number of seeds (0: 200, or 20 with -race)")
	flagOps   = flag.Int("sim.ops", 0, "lease operations per seed (0: 500; TestReplay: 2000)")
	flagBugs  = flag.String("sim.bugs", "none", "TestReplay: broken paxos variant")
	flagLate  = flag.Duration("sim.latewatchdog", 0, "TestReplay: fire every watchdog this much late")
	flagCheck = flag.Duration("sim.checkinterval", 0, "TestReplay, TestSimSeeds: every host's main-loop pass (0: 1 s)")
	flagDump  = flag.String("sim.trace", "", "TestReplay: write the whole trace to this file")
	flagNT    = flag.Bool("sim.notimeout", false, "TestReplay: a NO_TIMEOUT lockspace with the external agent")
	flagEarly = flag.Bool("sim.agentearly", false, "TestReplay: the agent marks DEAD_EXT without fencing (broken)")
)

// serial runs the simulator on one P: its tasks hand control to each other
// through channels, which is several times faster without cross-CPU
// wake-ups. (Tests of this package do not run in parallel.)
func serial(t *testing.T) {
	old := runtime.GOMAXPROCS(1)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
}

func opsPerSeed(def int) int {
	if *flagOps > 0 {
		return *flagOps
	}
	return def
}

// TestSimSeeds runs many seeds with the default fault mix and requires no
// violation. Without -race: 200 seeds × 500 operations (100,000 lease
// operations); with -race or -short: 10 × 500.
func TestSimSeeds(t *testing.T) {
	serial(t)
	seeds := *flagSeeds
	if seeds == 0 {
		seeds = 200
		if raceBuild || testing.Short() {
			seeds = 10
		}
	}
	start := time.Now()
	var total Counts
	var steps uint64
	var injected, disk uint64
	for i := 0; i < seeds; i++ {
		cfg := DefaultConfig(*flagSeed + uint64(i))
		cfg.MaxOps = opsPerSeed(500)
		cfg.CheckInterval = *flagCheck
		r := Run(cfg)
		if r.Violation != nil {
			t.Fatal(r.Report())
		}
		require.GreaterOrEqual(t, r.Counts.Ops(), uint64(cfg.MaxOps), r.Summary())
		total.Acquires += r.Counts.Acquires
		total.AcquireOK += r.Counts.AcquireOK
		total.Releases += r.Counts.Releases
		total.Crashes += r.Counts.Crashes
		total.Pauses += r.Counts.Pauses
		total.Partitions += r.Counts.Partitions
		total.Resets += r.Counts.Resets
		total.Doomed += r.Counts.Doomed
		total.Kills += r.Counts.Kills
		total.Exits += r.Counts.Exits
		steps += r.Steps
		injected += r.Disk.Injected() + r.Disk.Cut
		disk += r.Disk.Reads + r.Disk.Writes
	}
	t.Logf("%d seeds from %d: %d lease ops (%d acquires, %d ok, %d releases), %d steps, %d disk calls, %d disk faults, host faults crash=%d pause=%d partition=%d, watchdog resets %d, escalations %d (signals %d), client exits %d, 0 violations, %v",
		seeds, *flagSeed, total.Ops(), total.Acquires, total.AcquireOK, total.Releases, steps, disk, injected,
		total.Crashes, total.Pauses, total.Partitions, total.Resets, total.Doomed, total.Kills, total.Exits,
		time.Since(start).Round(time.Millisecond))
	require.NotZero(t, total.Crashes+total.Pauses+total.Partitions, "no host faults were injected")
	require.NotZero(t, total.Kills, "the manager's escalation never signalled a holder")
	require.NotZero(t, total.Exits, "no client died holding a lease")
	require.NotZero(t, injected, "no disk faults were injected")
}

// TestDeterminism runs seeds twice and requires the same trace, line for
// line.
func TestDeterminism(t *testing.T) {
	serial(t)
	seeds := []uint64{1, 7, 42}
	if raceBuild || testing.Short() {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		cfg := DefaultConfig(seed)
		cfg.MaxOps = 300
		cfg.KeepTrace = true
		a, b := Run(cfg), Run(cfg)
		require.Nil(t, a.Violation)
		require.Equal(t, a.Hash, b.Hash, "seed %d", seed)
		require.Equal(t, a.Trace, b.Trace, "seed %d", seed)
		require.Equal(t, a.Counts, b.Counts)
		require.Greater(t, len(a.Trace), 1000)
		// a different seed gives a different run
		cfg.Seed += 1000
		require.NotEqual(t, a.Hash, Run(cfg).Hash)
	}
}

// TestBrokenVariantsCaught proves the checker can fail: each deliberately
// broken paxos variant, and a watchdog that fires later than the model
// says, must be caught within maxSeeds seeds of 3000 operations. With -race
// or -short only the variants caught within a few hundred operations run.
func TestBrokenVariantsCaught(t *testing.T) {
	serial(t)
	const maxSeeds = 10
	variants := []struct {
		name  string
		slow  bool
		set   func(*Config)
		first uint64 // first seed (0: 1)
	}{
		{"skip-phase2-read", true, func(c *Config) { c.Bugs = paxos.BugSkipPhase2Read }, 0},
		{"leader-before-phase2", true, func(c *Config) { c.Bugs = paxos.BugLeaderBeforePhase2 }, 0},
		{"clock-liveness", false, func(c *Config) { c.Bugs = paxos.BugClockLiveness }, 0},
		{"late-watchdog-5s", false, func(c *Config) { c.LateWatchdog = 5 * time.Second }, 0},
		{"repeat-lver", false, func(c *Config) { lateLeaderConfig(c); c.Bugs = paxos.BugRepeatLver }, 0},
		// From seed 51: of seeds 1-60, 25, 39 and 56 catch it since
		// renewals start on a 250 ms grid of the clock (commit 3108091);
		// 35, 39 and 56-60 did after the main loop's passes came after
		// each renewal (session 7), and 3, 22, 26 and 37 of 1-40 before.
		{"stale-shared", false, func(c *Config) { c.Bugs = paxos.BugStaleShared; c.CheckInterval = lateMainLoop }, 51},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			if v.slow && (raceBuild || testing.Short()) {
				t.Skip("thousands of operations: runs without -race and -short")
			}
			first := max(v.first, 1)
			for seed := first; seed < first+maxSeeds; seed++ {
				cfg := DefaultConfig(seed)
				v.set(&cfg)
				cfg.MaxOps = 3000
				r := Run(cfg)
				if r.Violation == nil {
					continue
				}
				rep := r.Report()
				require.Contains(t, rep, fmt.Sprintf("seed %d", seed))
				require.Contains(t, rep, fmt.Sprintf("-sim.seed=%d", seed))
				if cfg.Bugs != 0 {
					require.Contains(t, rep, "-sim.bugs="+cfg.Bugs.String())
				}
				require.Len(t, r.Trace, cfg.TraceTail)
				require.True(t, strings.Contains(r.Violation.Error(), "while") || strings.Contains(r.Violation.Error(), "lver"),
					"unexpected violation: %v", r.Violation)
				t.Logf("caught at seed %d after %d ops: %v", seed, r.Counts.Ops(), r.Violation)
				// the replay finds the same violation after the same trace
				again := Run(cfg)
				require.NotNil(t, again.Violation)
				require.Equal(t, r.Violation.Error(), again.Violation.Error())
				require.Equal(t, r.Hash, again.Hash)
				return
			}
			t.Fatalf("variant %s not caught in %d seeds", v.name, maxSeeds)
		})
	}
}

// TestReplay replays one seed given with -sim.seed (and -sim.bugs,
// -sim.ops), printing the summary and, on a violation, the report. It
// runs only when -sim.seed is given.
func TestReplay(t *testing.T) {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "sim.seed" })
	if !given {
		t.Skip("replay needs -sim.seed=N")
	}
	serial(t)
	cfg := DefaultConfig(*flagSeed)
	b, ok := paxos.ParseBugs(*flagBugs)
	if !ok {
		t.Fatalf("bad -sim.bugs %q", *flagBugs)
	}
	cfg.Bugs = b
	cfg.LateWatchdog = *flagLate
	cfg.CheckInterval = *flagCheck
	cfg.NoTimeout, cfg.AgentEarly = *flagNT, *flagEarly
	cfg.MaxOps = opsPerSeed(2000)
	cfg.KeepTrace = *flagDump != ""
	start := time.Now()
	r := Run(cfg)
	t.Logf("%s (%v)", r.Summary(), time.Since(start))
	if *flagDump != "" {
		require.NoError(t, os.WriteFile(*flagDump, []byte(strings.Join(r.Trace, "\n")+"\n"), 0o644))
	}
	if r.Violation != nil {
		t.Fatal(r.Report())
	}
}

// TestKnownHazardSharedNewGeneration replays the first violation the soak
// found with the algorithm of the spec (seed 100265, docs/testing.md
// "Findings"): an exclusive acquirer whose host table has not yet seen a
// restarted host's new generation judged that host's shared hold dead
// (host_live, docs/paxos.md "Clearing dead shared holders") and cleared it. paxos.HostLive now
// treats a mode block of a newer generation than the table knows as live; this
// replay keeps it fixed.
func TestKnownHazardSharedNewGeneration(t *testing.T) {
	if raceBuild || testing.Short() {
		t.Skip("2000 operations: runs without -race and -short")
	}
	serial(t)
	cfg := DefaultConfig(100265)
	cfg.MaxOps = 2000
	r := Run(cfg)
	if r.Violation != nil {
		t.Fatalf("hazard is back (replay: %s): %v", r.ReplayCommand(), r.Violation)
	}
}

// lateMainLoop is the main-loop pass of TestLateMainLoopSharedRejoin: a
// daemon whose passes come late, so its host table (processed by the pass)
// is up to 6 s behind the renewal reads.
const lateMainLoop = 6 * time.Second

// staleSharedSeed is the seed at which TestLateMainLoopSharedRejoin requires
// the stale-shared variant, with lateMainLoop, to fail within 500 operations.
const staleSharedSeed = 92

// TestLateMainLoopSharedRejoin replays the violation seed 3 gave with main-loop
// passes every 6 s ("R2: h3.1/pid1 acquired exclusive (lver 42) while
// h2.2/pid2 holds it shared"): h2 had left the lockspace (h3's host table:
// generation 1, timestamp 0), rejoined with generation 2 and taken R2
// shared; h3's table had not been processed since, and the timestamp-0
// test of paxos.HostLive came before the newer-generation one, so h3
// cleared the live holder. Shared holders are now cleared only when a fresh
// read of their delta lease confirms the table (paxos.SharedHolderDead,
// docs/paxos.md "Clearing dead shared holders"); the broken variant
// (-sim.bugs=stale-shared) still fails the same way: at seed 3 until the
// main loop's passes came after each renewal (session 7), then at seed 58
// until renewals started on a 250 ms grid of the clock (commit 3108091);
// each moved every run's schedule. Now at seed 92 (h1.1 acquires exclusive
// while h2.2 holds it shared, after 123 ops; the first of seeds 1-400
// caught within 500 ops); the real code runs both seeds.
func TestLateMainLoopSharedRejoin(t *testing.T) {
	serial(t)
	for _, seed := range []uint64{3, staleSharedSeed} {
		cfg := DefaultConfig(seed)
		cfg.CheckInterval = lateMainLoop
		cfg.MaxOps = 2000
		if raceBuild || testing.Short() {
			cfg.MaxOps = 500 // the violations came after 123-454 operations
		}
		r := Run(cfg)
		if r.Violation != nil {
			t.Fatalf("hazard is back (replay: %s): %v", r.ReplayCommand(), r.Violation)
		}
		require.GreaterOrEqual(t, r.Counts.Ops(), uint64(cfg.MaxOps), r.Summary())
	}

	cfg := DefaultConfig(staleSharedSeed)
	cfg.CheckInterval = lateMainLoop
	cfg.Bugs = paxos.BugStaleShared
	cfg.MaxOps = 500
	r := Run(cfg)
	require.NotNil(t, r.Violation, "the broken variant must still fail: %s", r.Summary())
	require.Contains(t, r.Violation.Error(), "holds it shared")
}

// lateLeaderConfig is the mix of issue 18 item 4: five hosts on one
// resource, and half of the leader writes that commit another host's value
// stall 0.5–6 s first, so they land after newer leaders.
func lateLeaderConfig(c *Config) {
	c.Hosts = 5
	c.Resources = 1
	c.Faults.LateLeader = 0.5
}

// TestLateLeaderWrite replays the case of issue 18 item 4 (seed 1 of the
// late-leader mix): h4 adopts h3's value for lver 7 and stalls before its
// leader write; meanwhile h5 is granted lver 8. h4's late write puts lver 7
// back on disk, h5's release skips the leader write (no longer its own),
// and h5's next acquire ran the ballot for lver 8 again and was granted lver
// 8 a second time (the checker: "lver 8, not above the previous 8", after
// 131 ops). Acquire now republishes the newer leader it saw
// (paxos.DecideRollback), so the run goes on to 3000 operations with
// strictly increasing versions; the broken variant (-sim.bugs=repeat-lver)
// still fails the same way.
func TestLateLeaderWrite(t *testing.T) {
	serial(t)
	cfg := DefaultConfig(1)
	lateLeaderConfig(&cfg)
	cfg.MaxOps = 3000
	if raceBuild || testing.Short() {
		// The first stalled leader write of seed 1 comes after about 800
		// operations since the hosts run the real manager.
		cfg.MaxOps = 1500
	}
	r := Run(cfg)
	if r.Violation != nil {
		t.Fatal(r.Report())
	}
	require.NotZero(t, r.Counts.LateLeaders, "no leader write stalled")
	t.Logf("%s late-leader-writes=%d", r.Summary(), r.Counts.LateLeaders)

	cfg.Bugs = paxos.BugRepeatLver
	cfg.MaxOps = 3000
	r = Run(cfg)
	require.NotNil(t, r.Violation, "the broken variant was not caught")
	// Which version repeats depends on the run's timing (it was lver 8
	// after 131 ops before the renewals slept once per renewal); the
	// checker's finding is the same.
	require.Contains(t, r.Violation.Error(), "not above the previous")
}

var flagLateSeeds = flag.Int("sim.lateseeds", 0, "TestLateLeaderSweep: seeds 1..N of the late-leader mix, with 5 and with 3 hosts")

// TestLateLeaderSweep runs the late-leader mix (half of the -245 leader
// writes stalled) over -sim.lateseeds seeds with 5 and with 3 hosts, 3000
// operations each, and reports the seeds whose versions broke the
// checker's rules (docs/paxos.md "Lease versions": what is and is not
// guaranteed). Not run by default: 30 seeds take about a minute.
func TestLateLeaderSweep(t *testing.T) {
	if *flagLateSeeds <= 0 {
		t.Skip("-sim.lateseeds=N runs it")
	}
	for _, hosts := range []int{5, 3} {
		bad := 0
		for seed := uint64(1); seed <= uint64(*flagLateSeeds); seed++ {
			cfg := DefaultConfig(seed)
			lateLeaderConfig(&cfg)
			cfg.Hosts = hosts
			cfg.MaxOps = 3000
			if r := Run(cfg); r.Violation != nil {
				bad++
				t.Logf("hosts %d seed %d: %v", hosts, seed, r.Violation)
			}
		}
		t.Logf("hosts %d: %d of %d seeds broke a version rule", hosts, bad, *flagLateSeeds)
	}
}

// fairness is max/min of per-host acquisitions (min 0: +Inf) and the
// number of hosts that never got the lease.
func fairness(acq []uint64) (ratio float64, never int) {
	lo, hi := acq[0], acq[0]
	for _, a := range acq {
		lo, hi = min(lo, a), max(hi, a)
		if a == 0 {
			never++
		}
	}
	if lo == 0 {
		return math.Inf(1), never
	}
	return float64(hi) / float64(lo), never
}

// TestFairness is issue 18 item 3 in the simulator: 16 hosts loop on one
// lease (non-blocking acquire, hold 0–20 ms, release, again; 0–5 ms after a
// failure) for 60 s of simulated time with the default disk faults and no
// host faults. With the wait after a contended grant (docs/paxos.md
// "Fairness", bound 1 s) every host gets the lease and max/min stays at most
// 10; the run without it (ContendedWait 0, the default) is logged for
// comparison.
func TestFairness(t *testing.T) {
	serial(t)
	run := func(wait time.Duration) *Result {
		cfg := DefaultConfig(1)
		cfg.Hosts, cfg.Resources, cfg.Workers = 16, 1, 1
		cfg.Faults.HostEvery = 0
		cfg.Contend, cfg.ContendedWait = true, wait
		cfg.Duration = 60 * time.Second
		if raceBuild || testing.Short() {
			cfg.Hosts, cfg.Duration = 8, 20*time.Second
		}
		r := Run(cfg)
		if r.Violation != nil {
			t.Fatal(r.Report())
		}
		return r
	}
	on, off := run(time.Second), run(0)
	ron, non := fairness(on.Acquired)
	roff, noff := fairness(off.Acquired)
	t.Logf("with the wait:    %d acquisitions, per host %v, max/min %.1f, never %d", on.Counts.AcquireOK, on.Acquired, ron, non)
	t.Logf("without the wait: %d acquisitions, per host %v, max/min %.1f, never %d", off.Counts.AcquireOK, off.Acquired, roff, noff)
	require.Zero(t, non, "a host never got the lease")
	require.LessOrEqual(t, ron, 10.0)
}

// TestNoTimeoutSeeds runs 12 seeds of a NO_TIMEOUT lockspace: no watchdog,
// no takeover by time, an external agent that fences hosts in trouble and
// then marks them DEAD_EXT (docs/testing.md "NO_TIMEOUT lockspaces"). The
// checker must find nothing, and the agent must have fenced and marked.
func TestNoTimeoutSeeds(t *testing.T) {
	serial(t)
	seeds := 12
	if raceBuild || testing.Short() {
		seeds = 3
	}
	var fenced, marked, taken, acq uint64
	for i := 0; i < seeds; i++ {
		cfg := DefaultConfig(*flagSeed + uint64(i))
		cfg.NoTimeout = true
		cfg.MaxOps = opsPerSeed(500)
		r := Run(cfg)
		if r.Violation != nil {
			t.Fatal(r.Report())
		}
		require.Zero(t, r.Counts.Resets, "no watchdog")
		fenced += r.Counts.Fenced
		marked += r.Counts.Marked
		taken += r.Counts.TakenAfterMark
		acq += r.Counts.AcquireOK
	}
	t.Logf("%d seeds: fenced %d, marked %d, taken from a fenced holder %d, acquired %d", seeds, fenced, marked, taken, acq)
	require.NotZero(t, fenced)
	require.NotZero(t, marked)
	require.NotZero(t, taken)
}

// TestNoTimeoutBrokenCaught: the checker catches the two broken NO_TIMEOUT
// variants within 10 seeds: the agent marking DEAD_EXT without fencing,
// and the owner check taking over a NO_TIMEOUT owner by time.
func TestNoTimeoutBrokenCaught(t *testing.T) {
	serial(t)
	for _, v := range []struct {
		name  string
		set   func(*Config)
		first uint64
	}{
		{"agent-early", func(c *Config) { c.AgentEarly = true }, 1},
		// Needs a pause longer than host_dead_seconds over a held lease:
		// seeds 6, 29 and 36 of 1-40 catch it within 2,000 ops; from 6
		// to keep the simulator's time in make test.
		{"notimeout-by-time", func(c *Config) { c.Bugs = paxos.BugNoTimeoutByTime }, 6},
	} {
		t.Run(v.name, func(t *testing.T) {
			for seed := v.first; seed < v.first+10; seed++ {
				cfg := DefaultConfig(seed)
				cfg.NoTimeout = true
				v.set(&cfg)
				cfg.MaxOps = 3000
				r := Run(cfg)
				if r.Violation == nil {
					continue
				}
				require.Contains(t, r.Report(), "-sim.notimeout")
				t.Logf("caught at seed %d after %d ops: %v", seed, r.Counts.Ops(), r.Violation)
				again := Run(cfg)
				require.NotNil(t, again.Violation)
				require.Equal(t, r.Hash, again.Hash)
				return
			}
			t.Fatalf("%s not caught in 10 seeds", v.name)
		})
	}
}
