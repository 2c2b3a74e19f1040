package paxos

import (
	"testing"
	"testing/quick"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

func TestMajority(t *testing.T) {
	// dumb twin: the spec's three cases spelled out
	dumb := func(n, ok uint8) bool {
		nn, k := int(n%6), int(ok%6)
		switch {
		case nn == 0:
			return false
		case nn == 1:
			return k == 1 || k > 1
		case nn%2 == 1:
			return k >= nn/2+1
		}
		return k > nn/2
	}
	real := func(n, ok uint8) bool { return Majority(int(n%6), int(ok%6)) }
	require.NoError(t, quick.CheckEqual(real, dumb, nil))
	assert.False(t, Majority(4, 2))
	assert.True(t, Majority(4, 3))
	assert.True(t, Majority(3, 2))
	assert.False(t, Majority(2, 1))
}

func TestChooseMbal(t *testing.T) {
	cases := []struct{ max, m, h, want uint64 }{
		{0, 2000, 1, 1},
		{0, 2000, 2, 2},
		{1, 2000, 1, 2001},
		{2001, 2000, 1, 4001},
		{1, 2000, 2, 2002},
		{2002, 2000, 1, 4001},
		{4001, 2000, 2, 6002},
		{3, 250, 7, 257},
		{5, 0, 1, 2001}, // max_hosts 0 falls back to 2000
	}
	for _, c := range cases {
		assert.Equal(t, c.want, ChooseMbal(c.max, c.m, c.h), "%+v", c)
	}
	assert.Equal(t, uint64(4001), NextMbal(2001, 2000))
	// every ballot number is owned by one host: mbal % M == host_id % M
	f := func(maxMbal uint64, h uint16) bool {
		id := uint64(h%2000) + 1
		return ChooseMbal(maxMbal>>1, 2000, id)%2000 == id%2000
	}
	require.NoError(t, quick.Check(f, nil))
}

func TestDecideStart(t *testing.T) {
	free := diskfmt.Leader{Lver: 3, OwnerID: 2, OwnerGeneration: 1}
	held := free
	held.Timestamp = 99
	cases := []struct {
		name    string
		ld      diskfmt.Leader
		lver    uint64
		id, gen uint64
		want    Start
		err     error
	}{
		{"free", free, 0, 1, 1, StartRun, nil},
		{"lver mismatch on free", free, 2, 1, 1, 0, rescode.ErrAcquireLver},
		{"lver match", held, 3, 1, 1, StartCheckOwner, nil},
		{"ours", held, 0, 2, 1, StartRun, nil},
		{"old local", held, 0, 2, 4, StartRun, nil},
		{"newer generation of us", held, 0, 2, 0, StartCheckOwner, nil},
		{"other", held, 0, 1, 1, StartCheckOwner, nil},
	}
	for _, c := range cases {
		got, err := DecideStart(&c.ld, c.lver, c.id, c.gen)
		assert.Equal(t, c.err, err, c.name)
		assert.Equal(t, c.want, got, c.name)
	}
}

func TestDecideRetry(t *testing.T) {
	first := diskfmt.Leader{Lver: 4, OwnerID: 2, OwnerGeneration: 1, Timestamp: 50}
	mod := func(f func(*diskfmt.Leader)) diskfmt.Leader { l := first; f(&l); return l }
	cases := []struct {
		name string
		tmp  diskfmt.Leader
		want Retry
	}{
		{"unchanged", first, RetryBallot},
		{"committed for us", mod(func(l *diskfmt.Leader) { l.Lver, l.OwnerID, l.OwnerGeneration = 5, 1, 7 }), RetryOurs},
		{"committed for other", mod(func(l *diskfmt.Leader) { l.Lver, l.OwnerID = 5, 3 }), RetryOwned},
		{"our id older gen", mod(func(l *diskfmt.Leader) { l.Lver, l.OwnerID, l.OwnerGeneration = 5, 1, 6 }), RetryOwned},
		{"moved on", mod(func(l *diskfmt.Leader) { l.Lver = 6 }), RetryRestart},
		{"rewritten", mod(func(l *diskfmt.Leader) { l.WriteTimestamp = 1 }), RetryRestart},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, DecideRetry(&c.tmp, &first, 5, 1, 7), c.name)
	}
}

func TestEvalBallotRead(t *testing.T) {
	db := func(mbal, bal, inp, lver uint64) Slot {
		return Slot{Dblock: diskfmt.Dblock{Mbal: mbal, Bal: bal, Inp: inp, Inp2: 1, Inp3: 9, Lver: lver}}
	}
	sh := func(s Slot, id uint64) Slot { s.HostID = id; s.Mode.Flags = diskfmt.ModeShared; return s }
	cases := []struct {
		name   string
		slots  []Slot
		phase1 bool
		best   uint64 // best.Bal, 0 = none
		shared []uint64
		err    error
	}{
		{"empty", []Slot{{}, {}}, true, 0, nil, nil},
		{"older lver skipped", []Slot{db(9000, 9000, 3, 4)}, true, 0, nil, nil},
		{"newer lver aborts", []Slot{db(1, 1, 3, 6)}, true, 0, nil, rescode.ErrDblockLver},
		{"higher mbal aborts", []Slot{db(2002, 0, 0, 5)}, true, 0, nil, rescode.ErrDblockMbal},
		{"equal mbal does not abort", []Slot{db(2001, 2001, 2, 5)}, true, 2001, nil, nil},
		{"highest bal wins", []Slot{db(1, 1, 2, 5), db(2000, 1001, 3, 5), db(3, 3, 4, 5)}, true, 1001, nil, nil},
		{"bal 0 with value skipped", []Slot{db(5, 0, 3, 5)}, true, 0, nil, nil},
		{"bad checksum skipped", []Slot{{Bad: true, Dblock: diskfmt.Dblock{Lver: 99}}}, true, 0, nil, nil},
		{"shared recorded", []Slot{sh(db(1, 0, 0, 2), 4), sh(Slot{}, 7)}, true, 0, []uint64{4, 7}, nil},
		{"phase 2 no best", []Slot{db(1, 1, 2, 5)}, false, 0, nil, nil},
		{"phase 2 abort", []Slot{db(4001, 0, 0, 5)}, false, 0, nil, rescode.ErrDblockMbal},
	}
	for _, c := range cases {
		r, err := EvalBallotRead(c.slots, 5, 2001, c.phase1)
		assert.Equal(t, c.err, err, c.name)
		assert.Equal(t, c.best != 0, r.HaveBest, c.name)
		assert.Equal(t, c.best, r.Best.Bal, c.name)
		assert.Equal(t, c.shared, r.Shared, c.name)
	}
}

func TestPhase2AndCommit(t *testing.T) {
	d := Phase2Dblock(PhaseResult{}, 2001, 5, 1, 3, 700)
	assert.Equal(t, diskfmt.Dblock{Mbal: 2001, Bal: 2001, Inp: 1, Inp2: 3, Inp3: 700, Lver: 5}, d)
	best := PhaseResult{HaveBest: true, Best: diskfmt.Dblock{Bal: 2, Inp: 2, Inp2: 8, Inp3: 55}}
	d2 := Phase2Dblock(best, 2001, 5, 1, 3, 700)
	assert.Equal(t, diskfmt.Dblock{Mbal: 2001, Bal: 2001, Inp: 2, Inp2: 8, Inp3: 55, Lver: 5}, d2)

	first := diskfmt.Leader{Lver: 4, Flags: diskfmt.LeaderAlign1M | diskfmt.LeaderShortHold, NumHosts: 10}
	l := CommitLeader(first, d, 1, 3, 800, 0, false)
	assert.Equal(t, uint64(5), l.Lver)
	assert.Equal(t, [3]uint64{1, 3, 700}, [3]uint64{l.OwnerID, l.OwnerGeneration, l.Timestamp})
	assert.Equal(t, [3]uint64{1, 3, 800}, [3]uint64{l.WriteID, l.WriteGeneration, l.WriteTimestamp})
	assert.Equal(t, diskfmt.LeaderAlign1M, l.Flags, "EX self-commit clears SHORT_HOLD")
	assert.Equal(t, uint64(10), l.NumHosts)
	l = CommitLeader(first, d, 1, 3, 800, 6, true)
	assert.Equal(t, diskfmt.LeaderAlign1M|diskfmt.LeaderShortHold, l.Flags)
	assert.Equal(t, uint64(6), l.NumHosts)
	first.Flags = diskfmt.LeaderAlign1M
	l = CommitLeader(first, d2, 1, 3, 800, 0, true)
	assert.Equal(t, diskfmt.LeaderAlign1M, l.Flags, "committing another host leaves flags alone")
}

func TestOwnerWait(t *testing.T) {
	ld := diskfmt.Leader{OwnerID: 2, OwnerGeneration: 3, Timestamp: 40}
	delta2 := func(ts uint64) *diskfmt.Leader {
		return &diskfmt.Leader{OwnerID: 2, OwnerGeneration: 3, Timestamp: ts}
	}
	view := func(lastCheck, lastLive, ts uint64) HostView {
		v := HostView{FirstCheck: 100}
		v.HostID, v.OwnerID, v.OwnerGeneration, v.Timestamp, v.IOTimeout = 2, 2, 3, ts, 1
		v.LastCheck, v.LastLive = lastCheck, lastLive
		return v
	}

	// known and live at our last check: alive at once
	w := NewOwnerWait(view(500, 500, 77), true, &ld, 501, 10, 60)
	assert.Equal(t, uint64(68), w.DeadAfter, "host io_timeout 1")
	assert.Equal(t, OwnerAlive, w.Check(delta2(77), &ld, 501))

	// known, silent since 450: waiting until 450+68, dead after
	w = NewOwnerWait(view(500, 450, 77), true, &ld, 501, 10, 60)
	assert.Equal(t, uint64(450), w.WaitStart)
	assert.Equal(t, OwnerWaiting, w.Check(delta2(77), &ld, 518))
	assert.Equal(t, OwnerWaiting, w.Check(delta2(77), &ld, 518), "exactly 68 s is not dead")
	assert.Equal(t, OwnerDead, w.Check(delta2(77), &ld, 519))
	assert.Equal(t, OwnerAlive, w.Check(delta2(78), &ld, 519), "a change means alive")

	// unknown host: first look, measured from now, own io_timeout
	w = NewOwnerWait(HostView{}, false, &ld, 1000, 10, 60)
	assert.Equal(t, uint64(140), w.DeadAfter)
	assert.Equal(t, OwnerFirstLook, w.Check(delta2(9), &ld, 1000))
	assert.Equal(t, OwnerWaiting, w.Check(delta2(9), &ld, 1140))
	assert.Equal(t, OwnerDead, w.Check(delta2(9), &ld, 1141))

	// the view watches another generation: no baseline
	w = NewOwnerWait(view(500, 500, 77), true, &diskfmt.Leader{OwnerID: 2, OwnerGeneration: 2}, 501, 10, 60)
	assert.Zero(t, w.LastTS)

	// an owner whose delta lease is NO_TIMEOUT (sanlock 5.x) is never dead
	// by time: waiting for host_dead_seconds as for any owner, then
	// OwnerNoTimeout (-249) for ever; released or replaced still count,
	// and DEAD_EXT with the owner's generation frees it
	noTimeout := func(ts uint64) *diskfmt.Leader {
		d := delta2(ts)
		d.Flags = diskfmt.LeaderNoTimeout | diskfmt.LeaderAlign1M
		return d
	}
	w = NewOwnerWait(view(500, 500, 77), true, &ld, 501, 10, 60)
	assert.Equal(t, OwnerAlive, w.Check(noTimeout(77), &ld, 501))
	w = NewOwnerWait(view(500, 450, 77), true, &ld, 501, 10, 60)
	assert.Equal(t, OwnerWaiting, w.Check(noTimeout(77), &ld, 518))
	assert.Equal(t, OwnerNoTimeout, w.Check(noTimeout(77), &ld, 519))
	assert.Equal(t, OwnerAlive, w.Check(noTimeout(78), &ld, 519), "a change means alive")
	assert.Equal(t, OwnerNoTimeout, w.Check(noTimeout(77), &ld, 100000))
	dead := noTimeout(77)
	dead.Flags |= diskfmt.LeaderDeadExt
	dead.Unused1 = diskfmt.DeadExtMark
	assert.Equal(t, OwnerDeadExt, w.Check(dead, &ld, 501), "DEAD_EXT with the owner's generation: dead at once")
	wrong := *dead
	wrong.OwnerGeneration = 7
	assert.Equal(t, OwnerNoTimeout, w.Check(&wrong, &ld, 100000), "DEAD_EXT naming another generation is not a new incarnation")
	ordinary := delta2(77)
	ordinary.Flags = diskfmt.LeaderDeadExt
	assert.Equal(t, OwnerWaiting, w.Check(ordinary, &ld, 518), "DEAD_EXT on an ordinary lease: the time rule")
	assert.Equal(t, OwnerDead, w.Check(ordinary, &ld, 519))
	ordinary.OwnerGeneration = 7
	assert.Equal(t, OwnerWaiting, w.Check(ordinary, &ld, 518), "... also with another generation")
	released := noTimeout(0)
	assert.Equal(t, OwnerReleased, w.Check(released, &ld, 100000))

	assert.Equal(t, OwnerReleased, w.Check(&diskfmt.Leader{}, &ld, 0))
	assert.Equal(t, OwnerReplaced, w.Check(&diskfmt.Leader{OwnerID: 2, OwnerGeneration: 4, Timestamp: 1}, &ld, 0))
	assert.Equal(t, OwnerReplaced, w.Check(&diskfmt.Leader{OwnerID: 5, OwnerGeneration: 3, Timestamp: 1}, &ld, 0))
}

func TestHostLive(t *testing.T) {
	v := func(first, lastCheck, lastLive, ts, gen uint64) HostView {
		hv := HostView{FirstCheck: first}
		hv.LastCheck, hv.LastLive, hv.Timestamp, hv.OwnerGeneration, hv.IOTimeout = lastCheck, lastLive, ts, gen, 0
		return hv
	}
	cases := []struct {
		name string
		hv   HostView
		ok   bool
		now  uint64
		want bool
	}{
		{"lookup failed", HostView{}, false, 1000, true},
		{"never checked", v(0, 0, 0, 5, 1), true, 1000, true},
		{"released", v(10, 900, 800, 0, 1), true, 1000, false},
		{"newer generation", v(10, 900, 800, 5, 2), true, 1000, false},
		{"never live, long", v(10, 900, 0, 5, 1), true, 151, false},
		{"never live, short", v(10, 900, 0, 5, 1), true, 150, true},
		{"silent too long", v(10, 990, 850, 5, 1), true, 991, false},
		{"recently live", v(10, 990, 851, 5, 1), true, 991, true},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, HostLive(c.hv, c.ok, 1, c.now, 10, 60), c.name)
	}
	// A mode block from a newer generation than the table has seen: the
	// holder restarted and we only know its old incarnation (silent for
	// long) — it may be alive.
	assert.True(t, HostLive(v(10, 990, 850, 5, 1), true, 2, 991, 10, 60), "mode block newer than the table")
	// The same when the old incarnation released its host_id (timestamp
	// 0): the simulator's seed 3 with a late main loop.
	assert.True(t, HostLive(v(10, 990, 850, 0, 1), true, 2, 991, 10, 60), "released older generation")
}

// TestSharedHolderDead: the decision of docs/paxos.md "Clearing dead shared
// holders" with the fresh delta-lease read. The case of the simulator's seed
// 3 (main-loop passes every 6 s): host 2 left the lockspace (our table: gen
// 1, timestamp 0), rejoined with gen 2 and took the lease shared; an
// exclusive acquirer whose table had not been processed since cleared the
// live holder.
func TestSharedHolderDead(t *testing.T) {
	tbl := func(lastLive, ts, gen uint64) HostView {
		hv := HostView{FirstCheck: 10}
		hv.HostID, hv.OwnerID = 2, 2
		hv.LastCheck, hv.LastLive, hv.Timestamp, hv.OwnerGeneration = 990, lastLive, ts, gen
		return hv
	}
	lease := func(gen, ts uint64) *diskfmt.Leader {
		return &diskfmt.Leader{OwnerID: 2, OwnerGeneration: gen, Timestamp: ts}
	}
	const now = 1000 // host_dead_seconds = 8*10+60 = 140
	cases := []struct {
		name string
		hv   HostView
		ok   bool
		gen  uint64
		dl   *diskfmt.Leader
		want bool
	}{
		{"seed 3: table has the released old generation", tbl(850, 0, 1), true, 2, lease(2, 5000), false},
		{"table live", tbl(950, 77, 2), true, 2, lease(2, 77), false},
		{"lookup failed", HostView{}, false, 2, lease(3, 1), false},
		{"released, confirmed", tbl(850, 0, 2), true, 2, lease(2, 0), true},
		{"released in the table, renewing again (impossible, kept)", tbl(850, 0, 2), true, 2, lease(2, 9), false},
		{"newer generation, confirmed", tbl(850, 7, 3), true, 2, lease(3, 7), true},
		{"newer generation on disk, stale table says silent", tbl(700, 7, 2), true, 2, lease(3, 1), true},
		{"silent too long, confirmed", tbl(850, 7, 2), true, 2, lease(2, 7), true},
		{"silent in a stale table, renewing on disk", tbl(850, 7, 2), true, 2, lease(2, 8), false},
		{"silent too long, released on disk", tbl(850, 7, 2), true, 2, lease(2, 0), true},
		{"disk lease of another host_id", tbl(850, 7, 2), true, 2, &diskfmt.Leader{OwnerID: 3, OwnerGeneration: 2, Timestamp: 7}, false},
		{"disk lease older than the mode block", tbl(850, 0, 2), true, 2, lease(1, 0), false},
		{"silent too long, NO_TIMEOUT (5.x)", tbl(850, 7, 2), true, 2,
			&diskfmt.Leader{OwnerID: 2, OwnerGeneration: 2, Timestamp: 7, Flags: diskfmt.LeaderNoTimeout}, false},
		{"released, NO_TIMEOUT", tbl(850, 0, 2), true, 2,
			&diskfmt.Leader{OwnerID: 2, OwnerGeneration: 2, Flags: diskfmt.LeaderNoTimeout}, true},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, SharedHolderDead(c.hv, c.ok, 2, c.gen, c.dl, now, 10, 60), c.name)
	}
}

func TestDecideRelease(t *testing.T) {
	last := diskfmt.Leader{Lver: 3, OwnerID: 1, OwnerGeneration: 2, Timestamp: 50, WriteID: 1}
	mod := func(f func(*diskfmt.Leader)) diskfmt.Leader { l := last; f(&l); return l }
	cases := []struct {
		name  string
		cur   diskfmt.Leader
		write bool
		err   error
	}{
		{"ours", last, true, nil},
		{"written by other", mod(func(l *diskfmt.Leader) { l.WriteID = 2 }), false, nil},
		{"lver moved", mod(func(l *diskfmt.Leader) { l.Lver = 4 }), false, rescode.ErrReleaseLver},
		{"already free", mod(func(l *diskfmt.Leader) { l.Timestamp = 0 }), false, rescode.ErrReleaseOwner},
		{"other owner", mod(func(l *diskfmt.Leader) { l.OwnerID = 2 }), false, rescode.ErrReleaseOwner},
		{"other generation", mod(func(l *diskfmt.Leader) { l.OwnerGeneration = 1 }), false, rescode.ErrReleaseOwner},
		{"changed", mod(func(l *diskfmt.Leader) { l.WriteTimestamp = 9 }), false, rescode.ErrReleaseOwner},
	}
	for _, c := range cases {
		w, err := DecideRelease(&c.cur, &last, 1, 2)
		assert.Equal(t, c.err, err, c.name)
		assert.Equal(t, c.write, w, c.name)
	}
	cur := mod(func(l *diskfmt.Leader) { l.WriteTimestamp = 9 })
	w, err := DecideRelease(&cur, nil, 1, 2)
	assert.True(t, w, "no last: whatever is on disk")
	assert.NoError(t, err)

	held := last
	held.Flags = diskfmt.LeaderShortHold | diskfmt.LeaderAlign1M
	rel := ReleaseLeader(held, 1, 2, 99, "NEW")
	assert.Zero(t, rel.Timestamp)
	assert.Equal(t, diskfmt.LeaderAlign1M, rel.Flags)
	assert.Equal(t, [3]uint64{1, 2, 99}, [3]uint64{rel.WriteID, rel.WriteGeneration, rel.WriteTimestamp})
	assert.Equal(t, [3]uint64{3, 1, 2}, [3]uint64{rel.Lver, rel.OwnerID, rel.OwnerGeneration})
	assert.Equal(t, "NEW", diskfmt.NameString(rel.ResourceName[:]))
}

func TestBallotReadSize(t *testing.T) {
	assert.Equal(t, 1<<20, BallotReadSize(2000, 512))
	assert.Equal(t, 4096, BallotReadSize(4, 512))
	assert.Equal(t, 1<<20, BallotReadSize(250, 4096))
	assert.Equal(t, 8<<20, BallotReadSize(2000, 4096))
	assert.Equal(t, 16*512, BallotReadSize(10, 512))
}

func TestDecideRequest(t *testing.T) {
	held := diskfmt.Leader{Lver: 4, OwnerID: 3, Timestamp: 1}
	o, l, err := DecideRequest(&held, 0, true)
	assert.Equal(t, [2]uint64{3, 5}, [2]uint64{o, l})
	assert.NoError(t, err)
	_, _, err = DecideRequest(&held, 4, false)
	assert.Equal(t, rescode.ErrRequestOld, err)
	_, _, err = DecideRequest(&held, 0, false)
	assert.Equal(t, rescode.ErrRequestOld, err)
	o, _, err = DecideRequest(&diskfmt.Leader{Lver: 4}, 9, false)
	assert.Zero(t, o)
	assert.NoError(t, err)
}

func TestDecideExamine(t *testing.T) {
	rec := func(lver uint64, mode uint32) diskfmt.Request {
		return diskfmt.Request{Magic: diskfmt.RequestMagic, Version: diskfmt.RequestVersion, Lver: lver, ForceMode: mode}
	}
	assert.Equal(t, ExamineForce, DecideExamine(rec(5, 1), nil, 4, 10))
	assert.Equal(t, ExamineGraceful, DecideExamine(rec(5, 2), nil, 4, 10))
	assert.Equal(t, ExamineIgnore, DecideExamine(rec(5, 3), nil, 4, 10), "unknown mode")
	assert.Equal(t, ExamineIgnore, DecideExamine(rec(4, 1), nil, 4, 10), "old")
	assert.Equal(t, ExamineIgnore, DecideExamine(rec(0, 1), nil, 0, 10), "no lver")
	assert.Equal(t, ExamineIgnore, DecideExamine(rec(5, 0), nil, 4, 10), "cleared")
	assert.Equal(t, ExamineIgnore, DecideExamine(rec(5, 1), nil, 0, 0), "shared: pid 0")
	assert.Equal(t, ExamineIgnore, DecideExamine(rec(5, 1), rescode.ErrRequestMagic, 4, 10))

	sig, run := ExamineSignal(ExamineForce, 0, true)
	assert.Equal(t, "killed", sig.String())
	assert.False(t, run)
	sig, _ = ExamineSignal(ExamineForce, wire.RestrictSigkill, false)
	assert.Equal(t, "terminated", sig.String())
	_, run = ExamineSignal(ExamineGraceful, 0, true)
	assert.True(t, run)
	sig, _ = ExamineSignal(ExamineGraceful, wire.RestrictSigterm, false)
	assert.Equal(t, "killed", sig.String())
}

func TestCheckLocal(t *testing.T) {
	cases := []struct {
		name   string
		s      LocalState
		shared bool
		flags  uint32
		act    LocalAction
		code   rescode.Code
	}{
		{"rem", LocalState{OnRem: true}, false, 0, LocalFail, rescode.ErrEAGAIN},
		{"add", LocalState{OnAdd: true}, false, 0, LocalFail, rescode.ErrEBUSY},
		{"held SH join", LocalState{Held: true, HeldShared: true}, true, 0, LocalJoin, 0},
		{"held SH, want EX", LocalState{Held: true, HeldShared: true}, false, 0, LocalFail, ErrEEXIST},
		{"held EX", LocalState{Held: true}, false, 0, LocalFail, ErrEEXIST},
		{"orphan without flag", LocalState{Orphan: true}, false, 0, LocalFail, ErrEUCLEAN},
		{"orphan SH, want EX", LocalState{Orphan: true, OrphanShared: true}, false, AcquireOrphan, LocalFail, ErrEUCLEAN},
		{"orphan EX, want SH", LocalState{Orphan: true}, true, AcquireOrphan, LocalFail, ErrEUCLEAN},
		{"adopt EX", LocalState{Orphan: true}, false, AcquireOrphan, LocalAdopt, 0},
		{"adopt SH with ORPHAN_ONLY", LocalState{Orphan: true, OrphanShared: true}, true, AcquireOrphanOnly, LocalAdopt, 0},
		{"ORPHAN_ONLY alone: normal acquire (Q1)", LocalState{}, false, AcquireOrphanOnly, LocalDisk, 0},
		{"ORPHAN_ONLY|LVB", LocalState{}, false, AcquireOrphanOnly | AcquireLVB, LocalFail, rescode.ErrENOENT},
		{"new", LocalState{}, true, AcquireLVB, LocalDisk, 0},
	}
	for _, c := range cases {
		act, code := CheckLocal(c.s, c.shared, c.flags)
		assert.Equal(t, c.act, act, c.name)
		assert.Equal(t, c.code, code, c.name)
	}
}

func TestTestResourceOwners(t *testing.T) {
	hosts := []delta.HostInfo{
		{HostID: 1, Generation: 2, State: delta.HostLive},
		{HostID: 2, Generation: 1, State: delta.HostDead},
		{HostID: 3, Generation: 5, State: delta.HostFail},
		{HostID: 4, Generation: 1, State: 9},
	}
	cases := []struct {
		owner Owner
		flags uint32
		err   error
	}{
		{Owner{HostID: 9}, 0, nil},
		{Owner{HostID: 1, Generation: 1}, 0, nil},
		{Owner{HostID: 1, Generation: 2}, TRFFail, nil},
		{Owner{HostID: 1, Generation: 3}, 0, rescode.ErrEINVAL},
		{Owner{HostID: 2, Generation: 1}, 0, nil},
		{Owner{HostID: 3, Generation: 5}, TRFFail, nil},
		{Owner{HostID: 4, Generation: 1}, 0, rescode.ErrEINVAL},
	}
	for _, c := range cases {
		f, err := TestResourceOwners([]Owner{c.owner}, hosts)
		assert.Equal(t, c.flags, f, "%+v", c.owner)
		assert.Equal(t, c.err, err, "%+v", c.owner)
	}
}

func TestReadResource(t *testing.T) {
	c := newCluster(t, geo4K, 1, 8)
	ld, flags, err := ReadResource(bg, c.mems[0], c.off, "", "", 0)
	require.NoError(t, err)
	assert.Equal(t, testRes, diskfmt.NameString(ld.ResourceName[:]))
	assert.Equal(t, diskfmt.FlagSector4K|diskfmt.FlagAlign1M, flags)
	_, _, err = ReadResource(bg, c.mems[0], c.off, testSpace, "other", 0)
	assert.Equal(t, rescode.ErrLeaderResource, code(err))
	_, _, err = ReadResource(bg, c.mems[0], 0, "", "", 0)
	assert.Equal(t, rescode.ErrLeaderMagic, code(err))

	// owners: the 512 guess is reread with the lease's 4K sizes
	h := c.host(2, 4, nil)
	r, err := h.Acquire(bg, AcquireRequest{})
	require.NoError(t, err)
	own, err := ReadResourceOwners(bg, c.mems[0], c.off, testSpace, testRes, 0)
	require.NoError(t, err)
	assert.Equal(t, []Owner{{HostID: 2, Generation: 4, Timestamp: r.Leader.Timestamp}}, own.Owners)
	assert.Equal(t, geo4K, own.Geometry)
	_, err = ReadResourceOwners(bg, c.mems[0], c.off, testSpace, testRes, diskfmt.FlagSector512|diskfmt.FlagAlign1M)
	assert.Equal(t, rescode.ErrEINVAL, code(err))
	_, err = ReadResourceOwners(bg, c.mems[0], c.off, "", testRes, 0)
	assert.Equal(t, rescode.ErrLeaderLockspace, code(err), "names must be given")
	require.NoError(t, r.Release(bg, ReleaseOptions{}))
	own, err = ReadResourceOwners(bg, c.mems[0], c.off, testSpace, testRes, diskfmt.FlagSector4K|diskfmt.FlagAlign1M)
	require.NoError(t, err)
	assert.Empty(t, own.Owners)
	assert.Equal(t, uint64(1), own.Lver)
}

func TestDecideRollbackRepublish(t *testing.T) {
	onDisk := diskfmt.Leader{Magic: diskfmt.PaxosMagic, Lver: 7, OwnerID: 3, OwnerGeneration: 1, Timestamp: 90,
		WriteID: 4, WriteGeneration: 1, NumHosts: 5}
	assert.False(t, DecideRollback(&onDisk, &diskfmt.Leader{}), "nothing seen yet")
	seen := onDisk
	assert.False(t, DecideRollback(&onDisk, &seen))
	seen.Lver, seen.OwnerID, seen.OwnerGeneration, seen.Timestamp = 8, 5, 2, 120
	seen.Flags = diskfmt.LeaderShortHold
	require.True(t, DecideRollback(&onDisk, &seen))
	reinit := diskfmt.Leader{Magic: diskfmt.PaxosMagic}
	assert.False(t, DecideRollback(&reinit, &seen), "lver 0: initialised again, not rolled back")

	// another owner: named as a -245 commit would name it
	l := RepublishLeader(onDisk, seen, 1, 3, 500)
	assert.Equal(t, uint64(8), l.Lver)
	assert.Equal(t, [3]uint64{5, 2, 120}, [3]uint64{l.OwnerID, l.OwnerGeneration, l.Timestamp})
	assert.Equal(t, [3]uint64{1, 3, 500}, [3]uint64{l.WriteID, l.WriteGeneration, l.WriteTimestamp})
	assert.Equal(t, uint32(diskfmt.LeaderShortHold), l.Flags)
	assert.Equal(t, uint64(5), l.NumHosts)

	// ourselves: freed
	l = RepublishLeader(onDisk, seen, 5, 2, 500)
	assert.Equal(t, uint64(8), l.Lver)
	assert.Zero(t, l.Timestamp)
	assert.Zero(t, l.Flags)
	assert.True(t, Ours(&l, 5, 2))
	assert.False(t, Ours(&l, 5, 3), "an older life's value is not ours")
}
