package paxos

import (
	"encoding/binary"

	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

// This file holds the pure decisions of the paxos lease algorithm. None of
// them does I/O or reads a clock: every input, including "now" (our
// monotime in whole seconds), is a value. The drivers in acquire.go,
// ballot.go, release.go and resource.go only read, call these, write and
// sleep.

// Majority reports whether ok successful disks out of n form a majority:
// more than half. For one disk that is 1; for an even n exactly half is not
// enough (docs/paxos.md "Several disks").
func Majority(n, ok int) bool { return n > 0 && ok > n/2 }

// effectiveMaxHosts is leader.max_hosts, or the default 2000 when a leader
// (with a valid checksum) carries 0, which would otherwise divide by zero.
func effectiveMaxHosts(m uint64) uint64 {
	if m == 0 {
		return diskfmt.DefaultMaxHosts
	}
	return m
}

// ChooseMbal is the ballot number of our first ballot for a lease (spec:
// docs/paxos.md "Acquire algorithm" step 10): our host_id when every dblock read has mbal 0,
// else the next multiple of max_hosts above the largest mbal seen, plus our
// host_id. Each retry after an abort adds max_hosts (NextMbal).
func ChooseMbal(maxMbal, maxHosts, hostID uint64) uint64 {
	if maxMbal == 0 {
		return hostID
	}
	m := effectiveMaxHosts(maxHosts)
	return maxMbal - maxMbal%m + m + hostID
}

// NextMbal is the ballot number of the retry after an abort.
func NextMbal(mbal, maxHosts uint64) uint64 { return mbal + effectiveMaxHosts(maxHosts) }

// Start is what acquire does after its first (full) read.
type Start int

const (
	// StartRun runs the ballot using the leader just read.
	StartRun Start = iota
	// StartCheckOwner must first decide whether the current owner is alive.
	StartCheckOwner
)

// DecideStart applies docs/paxos.md "Acquire algorithm" steps 4–8 to the leader of the full
// read: a requested lver that differs fails with SANLK_ACQUIRE_LVER (even on
// a free lease); a free lease, a lease owned by (hostID, gen), or one we
// owned in an older generation run at once; anything else needs the owner
// liveness check.
func DecideStart(ld *diskfmt.Leader, acquireLver, hostID, gen uint64) (Start, error) {
	switch {
	case acquireLver != 0 && ld.Lver != acquireLver:
		return 0, rescode.ErrAcquireLver
	case ld.Timestamp == 0:
		return StartRun, nil
	case ld.OwnerID == hostID && ld.OwnerGeneration == gen:
		return StartRun, nil
	case ld.OwnerID == hostID && ld.OwnerGeneration < gen:
		return StartRun, nil
	}
	return StartCheckOwner, nil
}

// Retry is the decision taken before each ballot attempt (docs/paxos.md "Acquire algorithm"
// steps 12–14), from the leader as just read ("tmp").
type Retry int

const (
	RetryBallot  Retry = iota // run (or rerun) the ballot
	RetryOurs                 // someone committed next_lver with us as owner: success
	RetryOwned                // someone committed next_lver for another host: -244
	RetryRestart              // the leader moved on: start again from the full read
)

// DecideRetry compares the leader read before a ballot attempt (tmp) with
// the leader of the full read (first).
func DecideRetry(tmp, first *diskfmt.Leader, nextLver, hostID, gen uint64) Retry {
	switch {
	case tmp.Lver == nextLver && tmp.OwnerID == hostID && tmp.OwnerGeneration == gen:
		return RetryOurs
	case tmp.Lver == nextLver:
		return RetryOwned
	case tmp.Lver > nextLver:
		return RetryRestart
	case *tmp != *first:
		return RetryRestart
	}
	return RetryBallot
}

// DecideRollback reports whether the leader of a full read (first) is older
// than a leader this host life has already read or written (seen): a
// leader write that lands late (a host paused between deciding a ballot and
// writing its leader) can put an older leader back on disk. Running the
// ballot for first.Lver+1 then would run an instance that was decided
// already; its phase 1 clears our own value for it, and dblocks that
// carried the later versions may have been rewritten (a shared acquire
// that gives up writes a zero dblock), so the ballot could decide a new
// value for an old version: the version would be handed out twice, or
// after a later one. The caller republishes the newer leader instead
// (RepublishLeader) and starts over (docs/paxos.md "Lease versions").
// Lver 0 is a lease initialised again (init writes lver 0, a ballot never
// does): not a rollback, and the caller forgets what it saw.
func DecideRollback(first, seen *diskfmt.Leader) bool {
	return seen.Magic == diskfmt.PaxosMagic && first.Lver != 0 && first.Lver < seen.Lver
}

// RepublishLeader is the leader written after DecideRollback: the on-disk
// leader (its names and sizes) with the version, owner, timestamp and
// flags of the newer leader we saw, written by us now. If that owner is
// this host life the leader is freed (we are acquiring, so we do not hold
// that version). Otherwise it names the other owner exactly as a ballot
// that commits another host's value does (-245): the others then judge
// that owner by its liveness and its RELEASED dblock flag. It states only
// what was decided: that version went to that owner.
func RepublishLeader(first, seen diskfmt.Leader, hostID, gen, now uint64) diskfmt.Leader {
	l := first
	l.Lver = seen.Lver
	l.OwnerID, l.OwnerGeneration, l.Timestamp = seen.OwnerID, seen.OwnerGeneration, seen.Timestamp
	l.Flags = seen.Flags
	l.WriteID, l.WriteGeneration, l.WriteTimestamp = hostID, gen, now
	if Ours(&l, hostID, gen) {
		l.Timestamp = 0
		l.Flags &^= diskfmt.LeaderShortHold
	}
	return l
}

// Ours reports whether a committed leader grants the lease to this host
// life: our host_id and our generation. A value of an earlier life of our
// host_id (same id, older generation) is that life's, not ours: accepting it
// would hand out a version an earlier life may already have been granted.
func Ours(ld *diskfmt.Leader, hostID, gen uint64) bool {
	return ld.OwnerID == hostID && ld.OwnerGeneration == gen
}

// Slot is one host's sector as a ballot read sees it.
type Slot struct {
	HostID uint64
	Dblock diskfmt.Dblock
	Mode   diskfmt.ModeBlock
	// Bad is set when the dblock checksum does not match (or the slot lies
	// outside the buffer that was read).
	Bad bool
}

// PhaseResult is what one disk's ballot read contributed.
type PhaseResult struct {
	// Best is the dblock with the highest bal that carries a value
	// (inp != 0, bal != 0) for next_lver; valid when HaveBest.
	Best     diskfmt.Dblock
	HaveBest bool
	// Shared lists the host_ids whose mode block is SHARED (phase 1 only),
	// in slot order; recorded even for dblocks that are later skipped.
	Shared []uint64
	// Ballots counts the dblocks of next_lver that did not abort us, ours
	// included: more than one means another host ran a ballot for it.
	Ballots int
}

// EvalBallotRead checks one disk's dblocks after a ballot write (docs/paxos.md
// "Ballot" step 2, and step 5 for phase 2), in this order per dblock: skip a bad
// checksum; record a SHARED mode block (phase 1); skip an older lver; abort
// with SANLK_DBLOCK_LVER on a newer lver; abort with SANLK_DBLOCK_MBAL on a
// higher mbal (ties do not abort); skip dblocks with no value; keep the one
// with the highest bal. On abort the partial result is returned with the
// error.
func EvalBallotRead(slots []Slot, nextLver, mbal uint64, phase1 bool) (PhaseResult, error) {
	var r PhaseResult
	for i := range slots {
		if err := r.add(&slots[i], nextLver, mbal, phase1); err != nil {
			return r, err
		}
	}
	return r, nil
}

// EvalBallotBuf is EvalBallotRead over the dblocks of hosts 1..numHosts in
// a ballot read buffer, decoded one at a time in place: every dblock is
// looked at, in slot order, without allocating per slot.
//
// Most slots of a lease are zero dblocks (hosts that never took part): such
// a dblock (Dblock.IsZero: no checksum to verify) has lver 0, below any
// nextLver, so add ignores it except as a shared holder in phase 1. Those
// are recognised from their raw fields without building a Slot, and only
// their mode block's flags are read, in phase 1 alone. The result is the
// same as decoding every slot (TestEvalBallotBufMatchesDecode).
func EvalBallotBuf(buf []byte, ss int, numHosts, nextLver, mbal uint64, phase1 bool) (PhaseResult, error) {
	var r PhaseResult
	fast := nextLver > 0 && ss >= diskfmt.ModeBlockOffset+diskfmt.ModeBlockSize
	for id := uint64(1); id <= numHosts; id++ {
		if off := (1 + id) * uint64(ss); fast && off+uint64(ss) <= uint64(len(buf)) {
			if zeroDblock(buf[off : off+diskfmt.DblockSize]) {
				if phase1 && binary.LittleEndian.Uint32(buf[off+diskfmt.ModeBlockOffset:])&diskfmt.ModeShared != 0 {
					r.Shared = append(r.Shared, id)
				}
				continue
			}
		}
		s := SlotAt(buf, ss, id)
		if err := r.add(&s, nextLver, mbal, phase1); err != nil {
			return r, err
		}
	}
	return r, nil
}

// zeroDblock reports, from the raw bytes of a dblock, what Dblock.IsZero
// reports of its decoded form (mbal, bal, inp, lver and checksum zero).
func zeroDblock(b []byte) bool {
	_ = b[diskfmt.DblockSize-1]
	le := binary.LittleEndian
	return le.Uint64(b[0:])|le.Uint64(b[8:])|le.Uint64(b[16:])|le.Uint64(b[40:])|uint64(le.Uint32(b[48:])) == 0
}

// add is EvalBallotRead's step for one slot.
func (r *PhaseResult) add(s *Slot, nextLver, mbal uint64, phase1 bool) error {
	if s.Bad {
		return nil
	}
	if phase1 && s.Mode.Flags&diskfmt.ModeShared != 0 {
		r.Shared = append(r.Shared, s.HostID)
	}
	d := &s.Dblock
	switch {
	case d.Lver < nextLver:
		return nil
	case d.Lver > nextLver:
		return rescode.ErrDblockLver
	case d.Mbal > mbal:
		return rescode.ErrDblockMbal
	}
	r.Ballots++
	if !phase1 || d.Inp == 0 || d.Bal == 0 {
		return nil
	}
	if !r.HaveBest || d.Bal > r.Best.Bal {
		r.Best, r.HaveBest = *d, true
	}
	return nil
}

// BetterValue merges two disks' phase-1 results: the one with the higher bal
// wins, the first one on a tie.
func BetterValue(a, b PhaseResult) PhaseResult {
	if !a.HaveBest || (b.HaveBest && b.Best.Bal > a.Best.Bal) {
		a.Best, a.HaveBest = b.Best, b.HaveBest
	}
	return a
}

// Phase2Dblock is the dblock we write in phase 2 (docs/paxos.md "Ballot" step 3):
// the value of the best dblock found in phase 1 if any, else ourselves
// proposed at our time now; bal = mbal.
func Phase2Dblock(best PhaseResult, mbal, nextLver, hostID, gen, now uint64) diskfmt.Dblock {
	d := diskfmt.Dblock{Mbal: mbal, Bal: mbal, Lver: nextLver}
	if best.HaveBest {
		d.Inp, d.Inp2, d.Inp3 = best.Best.Inp, best.Best.Inp2, best.Best.Inp3
	} else {
		d.Inp, d.Inp2, d.Inp3 = hostID, gen, now
	}
	return d
}

// CommitLeader builds the leader a ballot winner writes (docs/paxos.md "Acquire algorithm" step
// 18) from the leader of the full read and the committed dblock.
// LFL_SHORT_HOLD is set when we commit ourselves for a shared acquire,
// cleared when we commit ourselves for exclusive, and left as it was when we
// commit another host's value.
func CommitLeader(first diskfmt.Leader, d diskfmt.Dblock, hostID, gen, now, newNumHosts uint64, shared bool) diskfmt.Leader {
	l := first
	l.Lver = d.Lver
	l.OwnerID = d.Inp
	l.OwnerGeneration = d.Inp2
	l.Timestamp = d.Inp3
	l.WriteID = hostID
	l.WriteGeneration = gen
	l.WriteTimestamp = now
	if newNumHosts != 0 {
		l.NumHosts = newNumHosts
	}
	if l.OwnerID == hostID {
		if shared {
			l.Flags |= diskfmt.LeaderShortHold
		} else {
			l.Flags &^= diskfmt.LeaderShortHold
		}
	}
	return l
}

// HostView is our latest view of another host of the lockspace, built from
// our own renewal reads: the host status table entry plus the table's first
// check time. Every time in it is our monotime; Timestamp is the host's own
// clock and is only ever compared for change.
type HostView struct {
	delta.HostStatus
	FirstCheck uint64
}

// hostDeadSeconds is host_dead_seconds for a host whose lease carries io
// (0 means: use our own), as host_info computes it for paxos.
func hostDeadSeconds(io uint16, ownIO, w int) uint64 {
	return uint64(delta.HostDeadSeconds(delta.OtherIOTimeout(io, ownIO), w))
}

// OwnerVerdict is one pass of the owner liveness check.
type OwnerVerdict int

const (
	// OwnerReleased: the owner's host_id lease is free; run the ballot.
	OwnerReleased OwnerVerdict = iota
	// OwnerReplaced: the host_id now belongs to another owner or a newer
	// generation of the owner; run the ballot.
	OwnerReplaced
	// OwnerFirstLook: no baseline timestamp yet; remember it and look again.
	OwnerFirstLook
	// OwnerAlive: the owner is renewing. The caller still checks the
	// owner's RELEASED flag when the leader was written by another host.
	OwnerAlive
	// OwnerDead: no change for more than host_dead_seconds; run the ballot.
	OwnerDead
	// OwnerWaiting: not alive, not yet dead; wait (or -247 with OWNER_NOWAIT).
	OwnerWaiting
	// OwnerNoTimeout: the owner's delta lease is NO_TIMEOUT (sanlock 5.x)
	// and has not changed for more than host_dead_seconds: it is never
	// dead by time; -249 until an external agent marks it DEAD_EXT.
	OwnerNoTimeout
	// OwnerDeadExt: the owner's NO_TIMEOUT delta lease carries DEAD_EXT
	// with the owner's own generation: declared dead after fencing; run
	// the ballot.
	OwnerDeadExt
)

func (v OwnerVerdict) String() string {
	return [...]string{"released", "replaced", "first-look", "alive", "dead", "waiting", "no-timeout", "dead-ext"}[v]
}

// OwnerWait is the state of the owner liveness check of docs/paxos.md "Owner liveness". It is
// built once per check from a snapshot of our host status entry for the
// owner, which is not refreshed while waiting.
type OwnerWait struct {
	View      HostView
	ViewOK    bool   // the snapshot lookup worked
	WaitStart uint64 // our monotime the wait counts from
	LastTS    uint64 // owner's delta timestamp we compare against (0: none yet)
	DeadAfter uint64 // host_dead_seconds for the owner
}

// NewOwnerWait starts the liveness check of the owner of ld at our time now.
// If our renewals already watch that exact owner (same host_id and
// generation, checked and seen live at least once), the wait counts from
// when we last saw its lease change and starts from the timestamp we saw;
// otherwise it starts now, with no baseline.
func NewOwnerWait(v HostView, ok bool, ld *diskfmt.Leader, now uint64, ownIO, w int) OwnerWait {
	ow := OwnerWait{View: v, ViewOK: ok, WaitStart: now}
	io := uint16(0)
	if ok {
		io = v.IOTimeout
	}
	ow.DeadAfter = hostDeadSeconds(io, ownIO, w)
	if ok && v.LastCheck != 0 && v.LastLive != 0 && v.OwnerID == ld.OwnerID && v.OwnerGeneration == ld.OwnerGeneration {
		ow.WaitStart = v.LastLive
		ow.LastTS = v.Timestamp
	}
	return ow
}

// Check is one pass over the owner's delta lease dl, read from disk just
// now, for the paxos leader ld (docs/paxos.md "Owner liveness" steps d–h). The owner is
// judged dead only when its delta lease has not changed for more than
// host_dead_seconds on our clock: its timestamps are never compared with
// our time.
//
// A delta lease marked DEAD_EXT (set_host, docs/delta.md "set_host
// DEAD_EXT") frees the owner only on a NO_TIMEOUT lease and only when the
// mark carries the owner's own generation: 5.1.1 writes any generation it
// is given, and a mark with another one names no incarnation we can trust
// to have been fenced, so it is not taken as a new incarnation either. On
// an ordinary lease the mark stops the host's renewals and the time rule
// (its watchdog) decides as always.
func (w *OwnerWait) Check(dl, ld *diskfmt.Leader, now uint64) OwnerVerdict {
	markedOther := dl.DeadExt() && dl.OwnerID == ld.OwnerID && dl.OwnerGeneration != ld.OwnerGeneration
	switch {
	case dl.Timestamp == 0:
		return OwnerReleased
	case dl.OwnerID == ld.OwnerID && dl.OwnerGeneration == ld.OwnerGeneration && dl.DeadExt() && dl.NoTimeout():
		return OwnerDeadExt
	case !markedOther && (dl.OwnerID != ld.OwnerID || dl.OwnerGeneration > ld.OwnerGeneration):
		return OwnerReplaced
	case w.LastTS == 0:
		w.LastTS = dl.Timestamp
		return OwnerFirstLook
	case dl.Timestamp != w.LastTS:
		return OwnerAlive
	case w.ViewOK && w.View.LastLive != 0 && w.View.LastCheck == w.View.LastLive:
		return OwnerAlive
	case now > w.WaitStart && now-w.WaitStart > w.DeadAfter:
		if dl.NoTimeout() {
			// A host of a NO_TIMEOUT lockspace that stopped renewing
			// may still use its leases (nothing bounds it by time): it
			// is never dead by time (docs/ondisk.md "Leader flags").
			// 5.1.1 too waits host_dead_seconds, then answers -249.
			return OwnerNoTimeout
		}
		return OwnerDead
	}
	return OwnerWaiting
}

// HostLive is the liveness rule used for shared holders (docs/paxos.md
// "Clearing dead shared holders"): given our view of host h (ok false when the lookup failed) and
// the generation in h's mode block, is the holder possibly alive? Unknown hosts
// count as live; a host is dead only if it released its host_id, came back
// with a newer generation, or nothing changed for more than
// host_dead_seconds since we first or last saw it.
func HostLive(v HostView, ok bool, modeGen, now uint64, ownIO, w int) bool {
	if !ok || v.LastCheck == 0 {
		return true
	}
	dead := hostDeadSeconds(v.IOTimeout, ownIO, w)
	since := func(t uint64) uint64 {
		if now > t {
			return now - t
		}
		return 0
	}
	switch {
	case v.OwnerGeneration < modeGen:
		// The holder restarted and our host table has not seen its new
		// generation yet: what we know of it is about an older
		// incarnation (maybe one that released its host_id, timestamp 0),
		// so it may well be alive. This comes before the timestamp test
		// (found by the simulator, seeds 100265 and 3 with a late main
		// loop; docs/paxos.md "Clearing dead shared holders").
		return true
	case v.Timestamp == 0:
		return false
	case v.OwnerGeneration > modeGen:
		return false
	case v.LastLive == 0 && since(v.FirstCheck) > dead:
		return false
	case v.LastLive != 0 && since(v.LastLive) > dead:
		return false
	}
	return true
}

// SharedHolderDead is the whole verdict on another host's SHARED mode block
// of generation modeGen (docs/paxos.md "Clearing dead shared holders"):
// HostLive over our host table, then, when the table says dead, a check of
// dl, that host's delta lease read from the lockspace disk just now. Our
// host table is only as fresh as its last processing (the main-loop pass
// after a renewal read; renewals may fail for a while), so its verdict
// alone is never enough to clear a holder. The fresh lease confirms
// "dead" only if it shows a newer generation on that host_id, the holder's
// own generation released (timestamp 0), or the holder's generation with
// the very timestamp our table first saw more than host_dead_seconds ago
// (the holder has not renewed since, so its watchdog has fired), as the
// owner liveness rule does for a leader owner. Anything else, including a
// lease of another owner or an older generation, keeps the holder.
func SharedHolderDead(v HostView, ok bool, hostID, modeGen uint64, dl *diskfmt.Leader, now uint64, ownIO, w int) bool {
	if HostLive(v, ok, modeGen, now, ownIO, w) {
		return false
	}
	switch {
	case dl.OwnerID != hostID || dl.OwnerGeneration < modeGen:
		return false
	case dl.DeadExt() && dl.OwnerGeneration != modeGen:
		return false // a mark naming another incarnation (OwnerWait.Check)
	case dl.OwnerGeneration > modeGen:
		return true
	case dl.Timestamp == 0:
		return true
	case dl.NoTimeout():
		return dl.DeadExt() // never dead by time (OwnerWait.Check)
	}
	// HostLive said dead, so ok and v.LastCheck != 0 hold.
	return v.OwnerID == hostID && v.OwnerGeneration == modeGen && v.Timestamp == dl.Timestamp &&
		v.LastLive != 0 && now > v.LastLive && now-v.LastLive > hostDeadSeconds(v.IOTimeout, ownIO, w)
}

// DecideRelease is docs/paxos.md "Leader release" steps 2–7: given the leader on disk (cur)
// and the leader we last wrote or accepted (last; nil for "whatever is on
// disk"), should we rewrite the leader? A leader written by another host is
// left alone (write=false, no error): our RELEASED dblock flag tells the
// others.
func DecideRelease(cur, last *diskfmt.Leader, hostID, gen uint64) (write bool, err error) {
	if last == nil {
		last = cur
	}
	switch {
	case cur.WriteID != hostID:
		return false, nil
	case cur.Lver != last.Lver:
		return false, rescode.ErrReleaseLver
	case cur.Timestamp == 0:
		return false, rescode.ErrReleaseOwner
	case cur.OwnerID != hostID || cur.OwnerGeneration != gen:
		return false, rescode.ErrReleaseOwner
	case *cur != *last:
		return false, rescode.ErrReleaseOwner
	}
	return true, nil
}

// ReleaseLeader is the leader a release writes: free (timestamp 0), written
// by us now, LFL_SHORT_HOLD cleared, optionally renamed; owner and lver
// stay.
func ReleaseLeader(cur diskfmt.Leader, hostID, gen, now uint64, rename string) diskfmt.Leader {
	l := cur
	if rename != "" {
		l.ResourceName = diskfmt.MustName(rename)
	}
	l.Timestamp = 0
	l.WriteID = hostID
	l.WriteGeneration = gen
	l.WriteTimestamp = now
	l.Flags &^= diskfmt.LeaderShortHold
	return l
}

// roundupPow2 is the smallest power of two >= n (n >= 1).
func roundupPow2(n uint64) uint64 {
	p := uint64(1)
	for p < n {
		p <<= 1
	}
	return p
}

// BallotReadSize is the size of a ballot read: roundup_pow2(N+2) sectors.
func BallotReadSize(numHosts uint64, sectorSize int) int {
	return int(roundupPow2(numHosts+2)) * sectorSize
}
