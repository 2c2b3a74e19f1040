package manager

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/wire"
)

// killCountMax is the most signals sent to one holder.
const killCountMax = 100

type killState struct {
	count       int
	last        time.Duration
	ranKillpath bool
}

// holder is one lease holder of a dying lockspace as the escalation sees
// it: its pid and, when it is a registered client, its RESTRICT flags and
// kill program.
type holder struct {
	pid      int
	client   ClientID // 0 when no registered client has this pid
	restrict uint32
	killpath string
	killargs string
	flags    uint32 // wire.KillpathPID: pass the pid to the kill program
}

// escalation is the situation of a dying lockspace at one main-loop pass.
type escalation struct {
	now              time.Duration // the manager clock
	lastRenewal      uint64        // our last successful renewal (seconds)
	ioTimeout        int
	killGraceSeconds int
	removing         bool // rem_lockspace or forced shutdown: no grace
}

// killAction is what the escalation does to one holder at this pass:
// run its kill program (argv) or send it sig.
type killAction struct {
	h     holder
	count int // signals sent to it so far, this one included
	sig   syscall.Signal
	argv  []string
}

// decideKills is the recovery escalation as a pure decision (docs/delta.md
// "Signalling holders", docs/protocol.md "Kill program"): each holder is
// acted on at most once a second and killCountMax times in all. Before the
// grace period ends, a holder that set a kill program (KILLPATH) gets it
// run once (with its pid as last argument if it asked for that) and
// nothing more until the grace ends; others get SIGTERM. After it, and for
// rem_lockspace and forced shutdown, SIGKILL. Restrict flags swap the two
// signals. kills holds the per-pid state and is updated.
func decideKills(e escalation, holders []holder, kills map[int]*killState) []killAction {
	graceEnd := delta.KillGraceEnd(e.lastRenewal, e.ioTimeout, e.killGraceSeconds)
	graceful := !e.removing && uint64(e.now/time.Second) < graceEnd
	var out []killAction
	for _, h := range holders {
		k := kills[h.pid]
		if k == nil {
			k = &killState{}
			kills[h.pid] = k
		}
		if k.count >= killCountMax || (k.count > 0 && e.now-k.last < time.Second) {
			continue
		}
		if graceful && k.ranKillpath {
			continue // the kill program had its chance until the grace ends
		}
		k.count++
		k.last = e.now
		a := killAction{h: h, count: k.count, sig: syscall.SIGKILL}
		if graceful {
			a.sig = syscall.SIGTERM
		}
		if h.client != 0 {
			switch {
			case a.sig == syscall.SIGTERM && h.killpath != "" && e.killGraceSeconds > 0:
				pidArg := 0
				if h.flags&wire.KillpathPID != 0 {
					pidArg = h.pid
				}
				a.argv = killpathArgv(h.killpath, h.killargs, pidArg)
				k.ranKillpath = true
			default:
				a.sig = wire.RestrictSignal(h.restrict, a.sig)
			}
		}
		out = append(out, a)
	}
	return out
}

// killPids is the driver of the escalation for one pass: it gathers the
// holders' client settings, decides (decideKills) and acts, logging each
// signal and kill program.
func (sp *space) killPids(run *delta.Lockspace, pids []int) {
	m := sp.m
	e := escalation{now: m.cfg.Clock.Now(), lastRenewal: run.Status().RenewalLastSuccess, ioTimeout: sp.ioTimeoutNow(),
		killGraceSeconds: m.conf().KillGraceSeconds, removing: sp.removeReq || m.forced}
	holders := make([]holder, len(pids))
	for i, pid := range pids {
		holders[i].pid = pid
		if id, st, ok := m.clients.byPid(pid); ok {
			holders[i] = holder{pid: pid, client: id, restrict: st.Restrict, killpath: st.KillPath,
				killargs: st.KillArgs, flags: st.Flags}
		}
	}
	m.mu.Lock()
	if sp.end == endStuck {
		m.mu.Unlock()
		return
	}
	acts := decideKills(e, holders, sp.kills)
	m.mu.Unlock()
	for _, a := range acts {
		pid := a.h.pid
		if a.h.client != 0 {
			m.clients.NoteKill(a.h.client, a.count, uint64(e.now/time.Second), a.argv != nil)
		}
		if a.argv != nil {
			// "kill P killpath" and "kill P sig S" are 3.8.5's wording, which
			// the escalation tests match in both daemons' logs.
			sp.log().Info(fmt.Sprintf("kill %d killpath %s count %d", pid, strings.Join(a.argv, " "), a.count))
			if err := m.cfg.RunKillpath(a.argv); err != nil {
				sp.log().Info(fmt.Sprintf("kill %d killpath error", pid), causeField(err, 0), spaceField(sp.ls.Name))
			}
			continue
		}
		sp.log().Info(fmt.Sprintf("kill %d sig %d count %d", pid, int(a.sig), a.count))
		if err := m.cfg.Kill(pid, a.sig); err != nil && !errors.Is(err, unix.ESRCH) {
			sp.log().Info(fmt.Sprintf("kill %d sig %d error", pid, int(a.sig)), causeField(err, 0), spaceField(sp.ls.Name))
		}
	}
}
