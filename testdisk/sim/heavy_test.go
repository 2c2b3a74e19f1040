package sim

import (
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/paxos"
	"github.com/gosanlock/gosanlock/testdisk"
)

var flagHeavySeeds = flag.Int("sim.heavyseeds", 0, "TestHeavyFaults: also sweep this many seeds from 2000 with the heavy fault mix")

// heavyFaults is a harsher disk than DefaultFaults: errors before the I/O
// 7.5x as often, hangs 5x, slow I/O 10x (mean 50 ms) and long stalls 5x.
// Writes that land but report an error (the unknown outcome of docs/paxos.md
// "Unknown leader writes") keep the default rate.
func heavyFaults() Faults {
	f := DefaultFaults()
	f.Disk = testdisk.Chain{
		testdisk.ErrorBefore(0.03),
		testdisk.Writes(testdisk.ErrorAfter(0.004)),
		testdisk.HangIO(0.005),
		testdisk.TornWrite(0.5),
		testdisk.Latency(0.5, testdisk.Exp{Mean: 50 * time.Millisecond, Max: 900 * time.Millisecond}),
		testdisk.Latency(0.01, testdisk.Uniform{Min: 500 * time.Millisecond, Max: 3 * time.Second}),
	}
	return f
}

func heavyRun(seed uint64, bugs paxos.Bugs) *Result {
	cfg := DefaultConfig(seed)
	cfg.Faults = heavyFaults()
	cfg.MaxOps = 1000
	cfg.Bugs = bugs
	return Run(cfg)
}

// TestHeavyFaults: seed 2266 with the heavy mix is where the erase-retract
// variant (the retract that wiped our dblock after a leader write of
// unknown outcome) breaks mutual exclusion; the real code must not. With
// -sim.heavyseeds=N it also sweeps N seeds from 2000 (300 gave 0
// violations at commit time, 2026-11-27).
func TestHeavyFaults(t *testing.T) {
	r := heavyRun(2266, 0)
	require.Nil(t, r.Violation, "seed 2266: %s", r.Report())
	bad := heavyRun(2266, paxos.BugEraseRetract)
	require.NotNil(t, bad.Violation, "the erase-retract variant is no longer caught at seed 2266 with the heavy mix")
	for s := uint64(2000); s < 2000+uint64(*flagHeavySeeds); s++ {
		r := heavyRun(s, 0)
		require.Nil(t, r.Violation, "seed %d: %s", s, r.Report())
	}
}
