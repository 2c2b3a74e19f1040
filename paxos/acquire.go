package paxos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

// acquireOpts are the inputs of one paxos acquire (docs/paxos.md "Acquire algorithm").
type acquireOpts struct {
	shared      bool   // PAXOS SHARED: commit ourselves with LFL_SHORT_HOLD
	ownerNowait bool   // fail with -247 instead of waiting for a dead owner
	lver        uint64 // required current lver, 0 for any
	numHosts    uint64 // new num_hosts for the committed leader, 0 to keep
	// carry is our SH mode block, written with every ballot dblock
	// (T_WRITE_DBLOCK_MBLOCK_SH, used by the SH→EX convert); nil for none.
	carry *diskfmt.ModeBlock
}

// acquireState lives across the attempts of one acquire (and its SH
// retries): the sizes in use, the shared holders seen, our last ballot
// dblock, and whether a failure may have left a proposal on disk.
type acquireState struct {
	ss, align   int
	numHosts    uint64 // N of the lease, known after the first read
	shared      map[uint64]bool
	sharedCount int // SHARED mode blocks seen, counted per disk
	dblock      diskfmt.Dblock
	retract     bool // T_RETRACT_PAXOS
	// contended: another host's ballot for our next_lver was seen (a
	// phase-1 read, or an abort by a higher mbal or lver).
	contended bool
	waited    bool // the fairness wait of this acquire is done
	// priorLver is Host.lastProposal when this acquire started (set with
	// priorSet); adopted: the last phase 2 took a value found in phase 1.
	priorLver uint64
	priorSet  bool
	adopted   bool
}

// staleOwn reports whether a value naming us (H, G) for lver may be one of
// an earlier acquire of ours rather than of this one: an earlier acquire
// proposed ourselves for lver or later. That acquire failed or released
// its grant (our dblock was RELEASED), so another host may already have
// taken a later version on the strength of that release (docs/paxos.md
// "Unknown leader writes").
func (st *acquireState) staleOwn(lver uint64) bool {
	return lver <= st.priorLver
}

// giveUpStale marks our dblock d RELEASED after a ballot or a leader read
// handed us a stale value of ours, writes no leader, and answers -245.
func (l *Lease) giveUpStale(ctx context.Context, o acquireOpts, st *acquireState, d diskfmt.Dblock, ld diskfmt.Leader) (diskfmt.Leader, error) {
	l.Host.log().Warn("ballot value is ours from an earlier acquire: releasing it",
		zap.String("resource", l.Name), zap.Uint64("lver", ld.Lver))
	if d != (diskfmt.Dblock{}) {
		d.Flags |= diskfmt.DblockReleased
		l.writeHostBlock(ctx, l.Host.ID, hostSector(&d, o.carry, st.ss), st.ss)
	}
	return ld, rescode.ErrAcquireOther
}

func (l *Lease) newState() *acquireState {
	ss, align := l.hints()
	return &acquireState{ss: ss, align: align, shared: map[uint64]bool{}}
}

// paxosAcquire runs paxos_lease_acquire (docs/paxos.md "Acquire
// algorithm"). It returns the committed leader on success; on
// -243/-244/-245/-247 the leader that decided it; on other errors the
// leader last read, if any. Each pass of its loop is one "restart:" of the
// algorithm, made of the named steps below: readLeader (steps 1-2 and the
// checks of the leader read), DecideStart (steps 4-7), waitOwner (step 8)
// or fairnessWait, then ballotLoop (steps 9-17) and commit (steps 18-20).
func (l *Lease) paxosAcquire(ctx context.Context, o acquireOpts, st *acquireState) (diskfmt.Leader, error) {
	h := l.Host
	if !st.priorSet {
		st.priorLver, st.priorSet = h.lastProposal(l.Name), true
	}
	for {
		if err := ctx.Err(); err != nil {
			return diskfmt.Leader{}, fmt.Errorf("acquire: %v: %w", err, rescode.ErrEPERM)
		}
		first, maxMbal, again, err := l.readLeader(ctx, st)
		if err != nil {
			return first, err
		}
		if again {
			continue
		}
		start, err := DecideStart(&first, o.lver, h.ID, h.Generation)
		if err != nil {
			return first, err
		}
		// Step 11 takes the leader of step 1 as the first leader read,
		// unless the owner liveness check ran in between.
		copyCur := true
		switch start {
		case StartCheckOwner:
			run, err := l.waitOwner(ctx, &first, o, st)
			if err != nil {
				return first, err
			}
			if !run {
				continue
			}
			copyCur = false
		case StartRun:
			waited, err := l.fairnessWait(ctx, st)
			if err != nil {
				return first, err
			}
			if waited {
				continue
			}
		}
		ld, again, err := l.ballotLoop(ctx, o, st, &first, maxMbal, copyCur)
		if !again {
			return ld, err
		}
	}
}

// readLeader is the full read of an acquire (steps 1 and 2 of "Acquire
// algorithm"): the leader of the lease and max_mbal, the largest mbal of
// its dblocks. again asks for a new full read: the lease's sector or align
// size differ from the ones used (now taken), or the leader is older than
// one this host saw and the newer one was written back (DecideRollback,
// docs/paxos.md "Lease versions"). A CAW lease, or a num_hosts that does
// not fit the lease, is refused.
func (l *Lease) readLeader(ctx context.Context, st *acquireState) (first diskfmt.Leader, maxMbal uint64, again bool, err error) {
	h := l.Host
	first, maxMbal, err = l.fullRead(ctx, st.ss, st.align)
	if err != nil {
		return first, 0, false, err
	}
	g, err := diskfmt.GeometryFromLeader(&first)
	if err != nil {
		return first, 0, false, err
	}
	if g.SectorSize != st.ss || g.AlignSize != st.align {
		l.log().Debug("lease sizes differ from lockspace, rereading",
			zap.Int("sector-size", g.SectorSize), zap.Int("align-size", g.AlignSize))
		st.ss, st.align = g.SectorSize, g.AlignSize
		return first, 0, true, nil
	}
	if first.CAW() {
		// sanlock 5.x updates a lease marked CAW with SCSI COMPARE AND
		// WRITE instead of a ballot; ours would not exclude such a
		// writer. Refused as 5.x refuses it where CAW cannot be used.
		return first, 0, false, fmt.Errorf("leader flags %#x: the lease is marked for SCSI COMPARE AND WRITE, which this daemon does not do: %w", first.Flags, rescode.ErrCAWOpen)
	}
	if (first.NumHosts+2)*uint64(st.ss) > uint64(st.align) {
		// A checksummed leader whose num_hosts does not fit its area:
		// refuse rather than size a ballot read from it.
		return first, 0, false, fmt.Errorf("num_hosts %d does not fit the lease: %w", first.NumHosts, rescode.ErrLeaderNumHosts)
	}
	st.numHosts = first.NumHosts
	if seen := h.seenLeader(l.Name); DecideRollback(&first, &seen) && !h.bug(BugRepeatLver) {
		nl := RepublishLeader(first, seen, h.ID, h.Generation, h.now())
		l.log().Info("leader older than one we saw (late leader write): republishing the newer one",
			zap.Uint64("on-disk-lver", first.Lver), zap.Uint64("seen-lver", seen.Lver))
		if err := l.writeLeader(ctx, &nl, st.ss); err != nil {
			return first, 0, false, err
		}
		h.noteLeader(l.Name, &nl)
		return first, 0, true, nil
	}
	h.noteLeader(l.Name, &first)
	return first, maxMbal, false, nil
}

// ballotLoop is the RUN part of "Acquire algorithm" (steps 9-17) for the
// leader first of the full read, whose dblocks showed maxMbal: ballots
// for next_lver until one succeeds (then commit, steps 18-20), the leader
// shows next_lver decided, or an error ends the acquire. again asks for a
// new full read (step 13 or 14). With copyCur the first leader check takes
// first instead of reading the leader again.
func (l *Lease) ballotLoop(ctx context.Context, o acquireOpts, st *acquireState, first *diskfmt.Leader, maxMbal uint64, copyCur bool) (ld diskfmt.Leader, again bool, err error) {
	h := l.Host
	nextLver := first.Lver + 1
	mbal := ChooseMbal(maxMbal, first.MaxHosts, h.ID) + h.mbalSpread(l.Name, first.MaxHosts)
	for {
		tmp := *first
		if copyCur {
			copyCur = false
		} else if tmp, err = l.leaderRead(ctx, st.ss); err != nil {
			return tmp, false, err
		}
		switch DecideRetry(&tmp, first, nextLver, h.ID, h.Generation) {
		case RetryOurs:
			if st.staleOwn(tmp.Lver) && !h.bug(BugEraseRetract) {
				ld, err := l.giveUpStale(ctx, o, st, st.dblock, tmp)
				return ld, false, err
			}
			l.log().Debug("owner is our inp, committed by another host", zap.Uint64("lver", tmp.Lver),
				zap.Uint64("writer", tmp.WriteID))
			h.noteLeader(l.Name, &tmp)
			h.noteGrant(l.Name, true)
			return tmp, false, nil
		case RetryOwned:
			return tmp, false, rescode.ErrAcquireOwned
		case RetryRestart:
			return tmp, true, nil
		}
		d, err := l.ballot(ctx, first, nextLver, mbal, o, st)
		if c := rescode.CodeOf(err); c == rescode.ErrDblockMbal || c == rescode.ErrDblockLver {
			st.contended = true
			delay := h.backoff()
			l.log().Debug("ballot aborted, retrying", zap.Uint64("mbal", mbal), zap.Error(err),
				zap.Duration("delay", delay))
			if err := l.backoffSleep(ctx, delay, first, nextLver, st.ss); err != nil {
				return *first, false, err
			}
			mbal = NextMbal(mbal, first.MaxHosts)
			continue
		}
		if err != nil {
			return *first, false, err
		}
		ld, err = l.commit(ctx, o, st, first, d)
		return ld, false, err
	}
}

// commit is steps 18-20 of "Acquire algorithm" after the ballot chose the
// value of dblock d: the new leader is written, and the acquire succeeds
// if it names us. A value of ours from an earlier acquire is given up
// instead (-245, docs/paxos.md "Unknown leader writes").
func (l *Lease) commit(ctx context.Context, o acquireOpts, st *acquireState, first *diskfmt.Leader, d diskfmt.Dblock) (diskfmt.Leader, error) {
	h := l.Host
	nl := CommitLeader(*first, d, h.ID, h.Generation, h.now(), o.numHosts, o.shared)
	ours := Ours(&nl, h.ID, h.Generation)
	if ours && st.adopted && st.staleOwn(nl.Lver) && !h.bug(BugEraseRetract) {
		return l.giveUpStale(ctx, o, st, d, nl)
	}
	if !ours && !h.bug(anyBug) {
		// Another host's value: it is committed already if the leader on
		// disk has reached its lver (the winner's own commit, usually),
		// and then our write could only land late, over a newer leader
		// (docs/paxos.md "Lease versions"). One leader read narrows that
		// window to the read-to-write gap. (Not in the broken variants:
		// they keep the I/O sequence their pinned seeds need.)
		if cur, err := l.leaderRead(ctx, st.ss); err == nil && cur.Lver >= nl.Lver {
			h.noteLeader(l.Name, &cur)
			l.log().Debug("commit other skipped: leader already at its lver", zap.Uint64("lver", nl.Lver),
				zap.Uint64("disk_lver", cur.Lver), zap.Uint64("owner", nl.OwnerID))
			return nl, rescode.ErrAcquireOther
		}
	}
	if err := l.writeLeader(ctx, &nl, st.ss); err != nil {
		st.retract = true
		return nl, err
	}
	h.noteLeader(l.Name, &nl)
	if !ours && (!h.bug(BugRepeatLver) || nl.OwnerID != h.ID) {
		return nl, rescode.ErrAcquireOther
	}
	h.noteGrant(l.Name, st.contended)
	l.log().Debug("commit self", zap.Uint64("lver", nl.Lver), zap.Uint64("mbal", d.Mbal))
	return nl, nil
}

// log is the host's logger with the resource name.
func (l *Lease) log() *zap.Logger { return l.Host.log().With(zap.String("resource", l.Name)) }

// waitOwner is the owner liveness check (docs/paxos.md "Owner liveness") for the leader of
// the full read. It returns run=true when the ballot may run, run=false to
// restart from the full read, or the error that ends the acquire.
func (l *Lease) waitOwner(ctx context.Context, first *diskfmt.Leader, o acquireOpts, st *acquireState) (bool, error) {
	h := l.Host
	if h.Live == nil {
		return false, rescode.ErrAcquireLockspace
	}
	v, ok := h.Live.Host(first.OwnerID)
	w := NewOwnerWait(v, ok, first, h.now(), h.IOTimeout, h.WatchdogFireTimeout)
	for {
		dl, err := h.Live.ReadDeltaLease(ctx, first.OwnerID)
		if err != nil {
			return false, err
		}
		verdict := w.Check(&dl, first, h.now())
		if h.bug(BugClockLiveness) && h.now() > dl.Timestamp+w.DeadAfter {
			verdict = OwnerDead
		}
		if h.bug(BugNoTimeoutByTime) && verdict == OwnerNoTimeout {
			verdict = OwnerDead
		}
		switch verdict {
		case OwnerReleased, OwnerReplaced, OwnerDead, OwnerDeadExt:
			h.log().Debug("owner gone", zap.String("resource", l.Name), zap.Uint64("host-id", first.OwnerID),
				zap.Stringer("verdict", verdict))
			return true, nil
		case OwnerAlive:
			if first.WriteID != first.OwnerID && l.ownerReleased(ctx, first.OwnerID, st.ss) {
				return true, nil
			}
			return false, rescode.ErrAcquireIDLive
		case OwnerNoTimeout:
			return false, rescode.ErrAcquireOwnedNoTimeout
		case OwnerWaiting:
			if o.ownerNowait {
				return false, rescode.ErrAcquireOwnedRetry
			}
		}
		if err := h.sleep(ctx, time.Second); err != nil {
			return false, err
		}
		cur, err := l.leaderRead(ctx, st.ss)
		if err != nil {
			return false, err
		}
		if cur != *first {
			return false, nil
		}
	}
}

// ownerReleased reads the owner's dblock from disk 0 and reports whether it
// carries the RELEASED flag (a read or checksum failure counts as no).
func (l *Lease) ownerReleased(ctx context.Context, owner uint64, ss int) bool {
	b, err := l.read(ctx, 0, ss, hostOffset(owner, ss))
	if err != nil {
		return false
	}
	d, err := diskfmt.DecodeDblock(b.Bytes())
	b.Release()
	return err == nil && d.Flags&diskfmt.DblockReleased != 0
}

// ballot runs both phases of one disk-paxos ballot (docs/paxos.md
// "Ballot") for next_lver with ballot number mbal: phase1 (steps 1-3)
// finds the value to propose, phase2 (steps 4-6) proposes it. It returns
// the chosen dblock; st.dblock is our dblock as last written.
func (l *Lease) ballot(ctx context.Context, ld *diskfmt.Leader, nextLver, mbal uint64, o acquireOpts, st *acquireState) (diskfmt.Dblock, error) {
	h := l.Host
	// usable: the disks whose phase-1 read did not time out; phase 2
	// reads only these.
	usable := make([]bool, len(l.Disks))
	best, err := l.phase1(ctx, ld, nextLver, mbal, o, st, usable)
	if err != nil {
		return st.dblock, err
	}
	d := Phase2Dblock(best, mbal, nextLver, h.ID, h.Generation, h.now())
	if h.bug(BugLeaderBeforePhase2) {
		st.dblock = d
		return d, nil
	}
	st.dblock, st.adopted = d, best.HaveBest
	if d.Inp == h.ID && d.Inp2 == h.Generation {
		h.noteProposal(l.Name, nextLver)
	}
	return d, l.phase2(ctx, ld, d, o, st, usable)
}

// phase1 is steps 1-3 of "Ballot": write our dblock announcing mbal for
// nextLver (clearing our earlier value), then read every disk's dblocks
// and keep the value with the largest bal. It notes the SHARED mode
// blocks seen and whether another host's ballot was met, and marks in
// usable the disks that answered or failed without a timeout.
func (l *Lease) phase1(ctx context.Context, ld *diskfmt.Leader, nextLver, mbal uint64, o acquireOpts, st *acquireState, usable []bool) (PhaseResult, error) {
	n, ss := len(l.Disks), st.ss
	d := diskfmt.Dblock{Mbal: mbal, Lver: nextLver}
	st.dblock = d
	if ok := l.writeBallotBlock(ctx, hostSector(&d, o.carry, ss), ss); !Majority(n, ok) {
		return PhaseResult{}, fmt.Errorf("phase 1 write on %d of %d disks: %w", ok, n, rescode.ErrDblockWrite)
	}
	size := BallotReadSize(ld.NumHosts, ss)
	var best PhaseResult
	reads := 0
	for i := range l.Disks {
		b, err := l.read(ctx, i, size, 0)
		if err != nil {
			usable[i] = !isTimeout(err)
			continue
		}
		usable[i] = true
		reads++
		r, err := EvalBallotBuf(b.Bytes(), ss, ld.NumHosts, nextLver, mbal, true)
		b.Release()
		st.contended = st.contended || r.Ballots > 1
		for _, id := range r.Shared {
			st.shared[id] = true
			st.sharedCount++
		}
		if err != nil {
			return best, err
		}
		best = BetterValue(best, r)
	}
	if !Majority(n, reads) {
		return best, fmt.Errorf("phase 1 read on %d of %d disks: %w", reads, n, rescode.ErrDblockRead)
	}
	return best, nil
}

// phase2 is steps 4-6 of "Ballot": write our dblock d carrying the value,
// then read the usable disks again and check that no ballot with a larger
// mbal or lver started meanwhile. A failure here marks the acquire
// "retract": the value may have been chosen.
func (l *Lease) phase2(ctx context.Context, ld *diskfmt.Leader, d diskfmt.Dblock, o acquireOpts, st *acquireState, usable []bool) error {
	n, ss := len(l.Disks), st.ss
	if ok := l.writeBallotBlock(ctx, hostSector(&d, o.carry, ss), ss); !Majority(n, ok) {
		st.retract = true
		return fmt.Errorf("phase 2 write on %d of %d disks: %w", ok, n, rescode.ErrDblockWrite)
	}
	if l.Host.bug(BugSkipPhase2Read) {
		return nil
	}
	size := BallotReadSize(ld.NumHosts, ss)
	reads := 0
	for i := range l.Disks {
		if !usable[i] {
			continue
		}
		b, err := l.read(ctx, i, size, 0)
		if err != nil {
			continue
		}
		reads++
		_, err = EvalBallotBuf(b.Bytes(), ss, ld.NumHosts, d.Lver, d.Mbal, false)
		b.Release()
		if err != nil {
			return err
		}
	}
	if !Majority(n, reads) {
		st.retract = true
		return fmt.Errorf("phase 2 read on %d of %d disks: %w", reads, n, rescode.ErrDblockRead)
	}
	return nil
}

// errCode reports whether err carries one of codes.
func errCode(err error, codes ...rescode.Code) bool {
	for _, c := range codes {
		if errors.Is(err, c) {
			return true
		}
	}
	return false
}
