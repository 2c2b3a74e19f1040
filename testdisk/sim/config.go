package sim

import (
	"fmt"
	"time"

	"github.com/gosanlock/gosanlock/paxos"
	"github.com/gosanlock/gosanlock/testdisk"
)

// Config describes one simulation run. Zero fields take the defaults of
// DefaultConfig.
type Config struct {
	Seed      uint64
	Hosts     int // host_ids 1..Hosts
	Resources int // resource leases R0..R(n-1)
	Workers   int // lease workers per host
	// IOTimeout is every host's io_timeout N (seconds); W is
	// watchdog_fire_timeout. host_dead_seconds = 8N + W.
	IOTimeout, W int
	// MaxOps stops the run after this many lease operations (acquire and
	// release calls); 0 means no limit.
	MaxOps int
	// Duration stops the run at this much simulated time; 0 means 1 hour.
	Duration time.Duration
	// MaxSteps stops the run after this many scheduler steps; 0: no limit.
	MaxSteps uint64
	Faults   Faults
	// Bugs selects a broken paxos variant (checker self-test). The
	// variants exist only in a build with the simbugs tag
	// (paxos.BugsCompiled); Run refuses a Bugs without it.
	Bugs paxos.Bugs
	// Contend replaces the workload with the contention loop on R0
	// (inst.contender); ContendedWait is paxos.Fairness.ContendedWait of
	// every host (0: off, as in the daemon).
	Contend       bool
	ContendedWait time.Duration
	// TuneHost, when set, adjusts each host's paxos.Host after it is
	// made (the fairness settings of fair_test.go).
	TuneHost func(*paxos.Host)
	// LateWatchdog makes every watchdog fire this much later than the
	// model says: a broken watchdog, for the checker's self-test.
	LateWatchdog time.Duration
	// TraceTail is how many trace lines a failure report shows (default
	// 60); KeepTrace keeps the whole trace in the Result.
	TraceTail int
	KeepTrace bool
	// CheckInterval is every host's manager main-loop pass
	// (manager.Setup.CheckInterval; 0: the manager's 1 s). A
	// long one models a daemon whose main loop runs late (CPU starvation):
	// a pass that a wake-up starts (the main loop's after each renewal,
	// clock.Clock.Wait) also comes only at the next multiple of it on the
	// host's clock, so the host table lags the renewal reads by up to that
	// much. Safety must not depend on it.
	CheckInterval time.Duration
	// NoTimeout makes the lockspace a NO_TIMEOUT one (sanlock 5.x): every
	// host slot carries the NO_TIMEOUT leader flag and no host has a
	// watchdog, so a host that stops renewing is never dead by time. The
	// external agent (agent.go) fences such hosts and then declares them
	// dead with set_host DEAD_EXT; AgentEarly is its broken variant that
	// marks a host without fencing it.
	NoTimeout  bool
	AgentEarly bool
}

// Faults is the fault mix of a run.
type Faults struct {
	// Disk decides every disk call's fault; nil means none.
	Disk testdisk.Injector
	// HostEvery is the mean simulated time between host faults (0: no
	// host faults). Each picks a host and one of crash, pause and
	// partition with the given weights.
	HostEvery               time.Duration
	Crash, Pause, Partition int
	// MaxOutage bounds a pause or partition (default 2 × host_dead_seconds).
	MaxOutage time.Duration
	// DriftPPM: with probability DriftP one host's clock runs fast or slow
	// by up to DriftPPM parts per million.
	DriftP   float64
	DriftPPM int64
	// LateLeader is the probability that a task about to write a resource
	// leader that commits another host's value (owner != writer: the
	// ballot adopted an earlier proposal) stalls first, for a time uniform
	// in [0.5 s, LateLeaderMax] (default 6 s): a host descheduled between
	// deciding and writing, whose leader write then lands after newer ones
	// (docs/paxos.md "Lease versions"). Only the stalled task waits; the host's other
	// tasks and its renewals go on. (A late write of a leader naming the
	// writer itself cannot roll the leader back: nobody takes a lease from
	// a live owner that has not released.)
	LateLeader    float64
	LateLeaderMax time.Duration
}

// DefaultFaults is the mix the tests and the soak use.
func DefaultFaults() Faults {
	return Faults{
		Disk: testdisk.Chain{
			testdisk.ErrorBefore(0.004),
			testdisk.Writes(testdisk.ErrorAfter(0.004)),
			testdisk.HangIO(0.001),
			testdisk.TornWrite(0.5),
			testdisk.Latency(0.5, testdisk.Exp{Mean: 5 * time.Millisecond, Max: 500 * time.Millisecond}),
			testdisk.Latency(0.002, testdisk.Uniform{Min: 500 * time.Millisecond, Max: 3 * time.Second}),
		},
		HostEvery: 40 * time.Second,
		Crash:     1, Pause: 2, Partition: 2,
		DriftP: 0.5, DriftPPM: 200,
	}
}

// DefaultConfig returns the configuration of seed with the default fault
// mix.
func DefaultConfig(seed uint64) Config {
	return Config{Seed: seed, Hosts: 4, Resources: 3, Workers: 2, IOTimeout: 1, W: 10,
		Duration: time.Hour, Faults: DefaultFaults(), TraceTail: 60}
}

func (c *Config) fill() {
	d := DefaultConfig(c.Seed)
	if c.Hosts <= 0 {
		c.Hosts = d.Hosts
	}
	if c.Resources <= 0 {
		c.Resources = d.Resources
	}
	if c.Workers <= 0 {
		c.Workers = d.Workers
	}
	if c.IOTimeout <= 0 {
		c.IOTimeout = d.IOTimeout
	}
	if c.W <= 0 {
		c.W = d.W
	}
	if c.Duration <= 0 {
		c.Duration = d.Duration
	}
	if c.TraceTail <= 0 {
		c.TraceTail = d.TraceTail
	}
	if c.Faults.LateLeaderMax <= 0 {
		c.Faults.LateLeaderMax = 6 * time.Second
	}
	if c.Faults.MaxOutage <= 0 {
		c.Faults.MaxOutage = 2 * time.Duration(8*c.IOTimeout+c.W) * time.Second
	}
}

// Counts are the operations of a run.
type Counts struct {
	Acquires, AcquireOK, Releases, ReleaseOK uint64
	Crashes, Pauses, Partitions, Resets      uint64
	Restarts, Doomed, LateLeaders            uint64
	// Fenced are the hosts the external agent fenced (NoTimeout), Marked
	// its set_host DEAD_EXT calls that succeeded.
	Fenced, Marked uint64
	// TakenAfterMark are exclusive acquisitions of a lease whose holder
	// was fenced, before that host came back (NoTimeout).
	TakenAfterMark uint64
	// Kills are the signals the hosts' escalations sent; Exits the
	// clients that exited holding a lease.
	Kills, Exits uint64
}

// Ops is the number of lease operations (acquire and release calls).
func (c Counts) Ops() uint64 { return c.Acquires + c.Releases }

// HostFaults is the number of host faults injected (crash, pause,
// partition, and one per drifting clock).
func (c Counts) HostFaults() uint64 { return c.Crashes + c.Pauses + c.Partitions }

// Result is the outcome of a run.
type Result struct {
	Config  Config
	Counts  Counts
	Drift   string // "h2 +150ppm" or ""
	Disk    testdisk.Stats
	SimTime time.Duration
	Steps   uint64
	// Violation is the first invariant the checker found broken, nil if
	// none.
	Violation error
	// Trace is the tail of the trace (the whole trace with KeepTrace).
	Trace []string
	// Hash is an FNV-1a hash of every trace line.
	Hash uint64
	// Acquired is the number of exclusive acquisitions per host (Contend
	// runs), index host_id-1.
	Acquired []uint64
}

// ReplayCommand is the shell command that replays the run.
func (r *Result) ReplayCommand() string {
	return ReplayCommand(r.Config)
}

// ReplayCommand returns the command that replays cfg with its seed.
func ReplayCommand(c Config) string {
	tags := ""
	if c.Bugs != 0 {
		tags = "-tags simbugs "
	}
	s := fmt.Sprintf("go test %s./testdisk/sim -run 'TestReplay$' -v -sim.seed=%d", tags, c.Seed)
	if c.Bugs != 0 {
		s += " -sim.bugs=" + c.Bugs.String()
	}
	if c.LateWatchdog != 0 {
		s += " -sim.latewatchdog=" + c.LateWatchdog.String()
	}
	if c.MaxOps != 0 {
		s += fmt.Sprintf(" -sim.ops=%d", c.MaxOps)
	}
	if c.CheckInterval != 0 {
		s += " -sim.checkinterval=" + c.CheckInterval.String()
	}
	if c.NoTimeout {
		s += " -sim.notimeout"
	}
	if c.AgentEarly {
		s += " -sim.agentearly"
	}
	return s
}

// Report is the failure report: violation, seed, replay command and the
// last trace lines.
func (r *Result) Report() string {
	s := fmt.Sprintf("VIOLATION (seed %d, bugs %v, after %d ops, sim time %v): %v\nreplay: %s\nlast %d trace lines:\n",
		r.Config.Seed, r.Config.Bugs, r.Counts.Ops(), r.SimTime, r.Violation, r.ReplayCommand(), len(r.Trace))
	for _, l := range r.Trace {
		s += "  " + l + "\n"
	}
	return s
}

// Summary is a one-line summary of a run.
func (r *Result) Summary() string {
	v := "ok"
	if r.Violation != nil {
		v = "VIOLATION"
	}
	return fmt.Sprintf("seed %d: %s ops=%d (acq %d/%d rel %d/%d) sim=%v steps=%d host-faults crash=%d pause=%d partition=%d resets=%d drift=%q disk: %v hash=%016x",
		r.Config.Seed, v, r.Counts.Ops(), r.Counts.AcquireOK, r.Counts.Acquires, r.Counts.ReleaseOK, r.Counts.Releases,
		r.SimTime.Round(time.Millisecond), r.Steps, r.Counts.Crashes, r.Counts.Pauses, r.Counts.Partitions,
		r.Counts.Resets, r.Drift, r.Disk, r.Hash)
}
