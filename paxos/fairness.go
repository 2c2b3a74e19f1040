package paxos

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/diskfmt"
)

// Fairness holds the measures that share a lease several hosts contend
// for (docs/paxos.md "Fairness" and "Fairness under contention"). None of
// them affects safety: they change only when a host runs its next ballot
// and with which ballot number. The zero value is sanlock's behaviour.
type Fairness struct {
	// WatchBackoff rereads the leader during the backoff after an aborted
	// ballot and ends the backoff once the lease is decided
	// (backoffSleep); false is sanlock's plain sleep.
	WatchBackoff bool
	// MbalSpread, when above 1, makes the first ballot of an acquire on a
	// lease where we met other hosts add k*max_hosts to the usual ballot
	// number, k uniform in [0, MbalSpread): concurrent ballots then win
	// at random instead of by host_id (mbalSpread). 0 or 1 is sanlock's
	// choice.
	MbalSpread int
	// ContendedWait bounds the random wait before the next ballot on a
	// lease whose last grant to us was contended (fairnessWait); 0 turns
	// the wait off. The daemon leaves it off; the simulator measures it
	// (SuggestedContendedWait).
	ContendedWait time.Duration
}

// DaemonFairness is the Fairness the daemon gives every lockspace: the
// watched backoff and spread ballot numbers, no contended wait.
func DaemonFairness() Fairness {
	return Fairness{WatchBackoff: true, MbalSpread: SuggestedMbalSpread}
}

// SuggestedContendedWait is the bound of Fairness.ContendedWait the simulator's
// fairness figure uses (the ballot backoff's range).
const SuggestedContendedWait = time.Second

// SuggestedMbalSpread is the Fairness.MbalSpread the daemon uses: above the
// number of hosts that usually start a ballot at the same moment.
const SuggestedMbalSpread = 32

// fairnessWait is the wait before the ballot on a free lease whose last
// grant to us was contended (docs/paxos.md "Fairness"), once per acquire
// and only with Fairness.ContendedWait set: waited asks for a new full read.
func (l *Lease) fairnessWait(ctx context.Context, st *acquireState) (waited bool, err error) {
	h := l.Host
	if st.waited || h.Fairness.ContendedWait <= 0 || !h.takeContended(l.Name) {
		return false, nil
	}
	// We won this lease against other hosts last time and it is free
	// again: let them have a go first.
	st.waited = true
	delay := h.contendedWait()
	l.log().Debug("lease was contended, waiting before the ballot", zap.Duration("delay", delay))
	if err := h.sleep(ctx, delay); err != nil {
		return false, err
	}
	return true, nil
}

// backoffSleep is the backoff after an aborted ballot. With
// Fairness.WatchBackoff it rereads the leader at growing intervals (10 ms,
// then twice the previous gap) and ends early once the leader shows that
// next_lver is decided (its lver is next_lver or above): the caller's
// next leader read then takes that decision (DecideRetry) at
// once instead of after the rest of up to 1 s (docs/paxos.md "Fairness
// under contention"). Other changes of the leader (below next_lver) do
// not end it: the caller's read after the full backoff handles them as
// before. The reads change nothing on disk; a failed read just sleeps out
// the rest.
func (l *Lease) backoffSleep(ctx context.Context, delay time.Duration, first *diskfmt.Leader, nextLver uint64, ss int) error {
	h := l.Host
	if !h.Fairness.WatchBackoff {
		return h.sleep(ctx, delay)
	}
	step := watchFirstStep
	for delay > 0 {
		d := min(step, delay)
		if err := h.sleep(ctx, d); err != nil {
			return err
		}
		delay -= d
		if delay <= 0 {
			return nil
		}
		tmp, err := l.leaderRead(ctx, ss)
		if err != nil {
			return h.sleep(ctx, delay)
		}
		if tmp.Lver >= nextLver {
			return nil
		}
		step *= 2
	}
	return nil
}

// watchFirstStep is the first leader reread of backoffSleep: long enough
// for the host whose ballot aborted ours to write its leader.
const watchFirstStep = 10 * time.Millisecond

// noteRival records the outcome of an acquire of name: rival when it met
// another host, granted when it succeeded.
func (h *Host) noteRival(name string, rival, granted bool) {
	h.seenMu.Lock()
	defer h.seenMu.Unlock()
	switch {
	case rival:
		if h.rivals == nil {
			h.rivals = map[string]bool{}
		}
		h.rivals[name] = true
	case granted:
		delete(h.rivals, name)
	}
}

// mbalSpread is what the first ballot of an acquire of name adds to
// ChooseMbal's number: k*max_hosts with k uniform in [0, Fairness.MbalSpread) when
// the last acquire of name here met another host, else 0. The sum keeps
// the residue host_id mod max_hosts and stays above every mbal read.
func (h *Host) mbalSpread(name string, maxHosts uint64) uint64 {
	if h.Fairness.MbalSpread <= 1 {
		return 0
	}
	h.seenMu.Lock()
	r := h.rivals[name]
	h.seenMu.Unlock()
	if !r {
		return 0
	}
	h.randMu.Lock()
	defer h.randMu.Unlock()
	if h.Rand == nil {
		return 0
	}
	return uint64(h.Rand.IntN(h.Fairness.MbalSpread)) * effectiveMaxHosts(maxHosts)
}

// noteGrant records whether our grant of name was contended.
func (h *Host) noteGrant(name string, contended bool) {
	h.seenMu.Lock()
	defer h.seenMu.Unlock()
	if !contended {
		delete(h.contended, name)
		return
	}
	if h.contended == nil {
		h.contended = map[string]bool{}
	}
	h.contended[name] = true
}

// takeContended reports whether our last grant of name was contended and
// forgets it: one wait per contended grant.
func (h *Host) takeContended(name string) bool {
	h.seenMu.Lock()
	defer h.seenMu.Unlock()
	c := h.contended[name]
	delete(h.contended, name)
	return c
}

// contendedWait is a uniform random delay in [0, Fairness.ContendedWait].
func (h *Host) contendedWait() time.Duration {
	bound := h.Fairness.ContendedWait
	h.randMu.Lock()
	defer h.randMu.Unlock()
	if bound <= 0 || h.Rand == nil {
		return 0
	}
	return time.Duration(h.Rand.Int64N(int64(bound) + 1))
}
