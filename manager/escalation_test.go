package manager

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/wire"
)

// TestDecideKills walks the escalation of docs/delta.md "Signalling
// holders" pass by pass, in made-up time: no clock, no processes.
func TestDecideKills(t *testing.T) {
	const io, grace = 10, 40
	last := uint64(1000) // last good renewal
	start := last + uint64(delta.IDRenewalFailSeconds(io))
	graceEnd := delta.KillGraceEnd(last, io, grace)
	at := func(sec uint64) escalation {
		return escalation{now: time.Duration(sec) * time.Second, lastRenewal: last, ioTimeout: io, killGraceSeconds: grace}
	}
	plain := holder{pid: 10}
	kp := holder{pid: 11, client: 1, killpath: "/bin/kp", killargs: "a b", flags: wire.KillpathPID}
	noTerm := holder{pid: 12, client: 1, restrict: wire.RestrictSigterm}
	noKill := holder{pid: 13, client: 1, restrict: wire.RestrictSigkill}
	all := []holder{plain, kp, noTerm, noKill}
	kills := map[int]*killState{}

	type act struct {
		pid   int
		sig   syscall.Signal
		argv  []string
		count int
	}
	got := func(e escalation) []act {
		var out []act
		for _, a := range decideKills(e, all, kills) {
			x := act{pid: a.h.pid, argv: a.argv, count: a.count}
			if a.argv == nil {
				x.sig = a.sig
			}
			out = append(out, x)
		}
		return out
	}

	// Within the grace period: SIGTERM, the kill program once (with the
	// pid), and the restrict swap.
	require.Less(t, start+1, graceEnd)
	assert.Equal(t, []act{
		{10, syscall.SIGTERM, nil, 1},
		{11, 0, []string{"/bin/kp", "a", "b", "11"}, 1},
		{12, syscall.SIGKILL, nil, 1},
		{13, syscall.SIGTERM, nil, 1},
	}, got(at(start)))
	// Less than a second later: nothing.
	e := at(start)
	e.now += 500 * time.Millisecond
	assert.Empty(t, got(e))
	// A second later: again, but the kill program is not run twice.
	assert.Equal(t, []act{
		{10, syscall.SIGTERM, nil, 2},
		{12, syscall.SIGKILL, nil, 2},
		{13, syscall.SIGTERM, nil, 2},
	}, got(at(start+1)))
	// After the grace period: SIGKILL (SIGTERM for a client that
	// restricted SIGKILL), the kill program's holder included.
	assert.Equal(t, []act{
		{10, syscall.SIGKILL, nil, 3},
		{11, syscall.SIGKILL, nil, 2},
		{12, syscall.SIGKILL, nil, 3},
		{13, syscall.SIGTERM, nil, 3},
	}, got(at(graceEnd)))

	// At most killCountMax signals per holder.
	for s := graceEnd + 1; s < graceEnd+2*killCountMax; s++ {
		got(at(s))
	}
	assert.Equal(t, killCountMax, kills[10].count)
	assert.Empty(t, got(at(graceEnd+3*killCountMax)))
}

// TestDecideKillsRemoving: rem_lockspace and forced shutdown give no
// grace: SIGKILL at once, no kill program.
func TestDecideKillsRemoving(t *testing.T) {
	start := time.Duration(1000+delta.IDRenewalFailSeconds(10)) * time.Second
	e := escalation{now: start, lastRenewal: 1000, ioTimeout: 10, killGraceSeconds: 40, removing: true}
	kp := holder{pid: 11, client: 1, killpath: "/bin/kp"}
	acts := decideKills(e, []holder{{pid: 10}, kp}, map[int]*killState{})
	require.Len(t, acts, 2)
	for _, a := range acts {
		assert.Nil(t, a.argv)
		assert.Equal(t, syscall.SIGKILL, a.sig)
	}
	// Without a grace period (kill_grace_seconds 0) a kill program is
	// never run: SIGKILL at once.
	e.removing, e.killGraceSeconds = false, 0
	acts = decideKills(e, []holder{kp}, map[int]*killState{})
	require.Len(t, acts, 1)
	assert.Nil(t, acts[0].argv)
	assert.Equal(t, syscall.SIGKILL, acts[0].sig)
}
