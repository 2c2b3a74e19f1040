package delta_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

// See docs/timing.md "The numbers".
func TestTimingTable(t *testing.T) {
	for _, c := range []struct {
		n                                        int
		renew, warn, fail, dead, large, held, sd int
		sbs, kill                                int
	}{
		{10, 20, 60, 80, 140, 80, 140, 20, 60, 120},
		{1, 2, 6, 8, 68, 8, 68, 2, 6, 48},
		{5, 10, 30, 40, 100, 40, 100, 10, 30, 80},
		{20, 40, 120, 160, 220, 160, 220, 40, 120, 200},
	} {
		tm := delta.NewTiming(c.n, 0)
		assert.Equal(t, c.renew, tm.IDRenewalSeconds(), "n=%d", c.n)
		assert.Equal(t, c.warn, tm.IDRenewalWarnSeconds(), "n=%d", c.n)
		assert.Equal(t, c.fail, tm.IDRenewalFailSeconds(), "n=%d", c.n)
		assert.Equal(t, c.dead, tm.HostDeadSeconds(), "n=%d", c.n)
		assert.Equal(t, c.large, delta.DeltaLargeDelay(c.n), "n=%d", c.n)
		assert.Equal(t, c.held, delta.AcquireHeldDelay(c.n, 60), "n=%d", c.n)
		assert.Equal(t, c.sd, delta.DeltaShortDelay(c.n), "n=%d", c.n)
		assert.Equal(t, c.sbs, tm.SetBitmapSeconds(), "n=%d", c.n)
		assert.Equal(t, uint64(100+c.kill), delta.KillGraceEnd(100, c.n, 40), "n=%d", c.n)
		assert.Equal(t, seconds(c.dead), tm.RenewWriteTimeout(), "n=%d", c.n)
		assert.Equal(t, seconds(c.n), tm.IOTimeoutDuration(), "n=%d", c.n)
	}
	assert.Equal(t, delta.Timing{IOTimeout: 10, WatchdogFireTimeout: 60}, delta.NewTiming(0, 0))
	// A smaller W shortens only the W-dependent values.
	assert.Equal(t, 8+10, delta.HostDeadSeconds(1, 10))
	assert.Equal(t, 8, delta.AcquireHeldDelay(1, 0)) // max(8N+W, 8N)
}

// See docs/timing.md "Which io_timeout", "Mixed io_timeouts".
func TestMixedIOTimeouts(t *testing.T) {
	assert.Equal(t, 10, delta.OtherIOTimeout(0, 10))
	assert.Equal(t, 1, delta.OtherIOTimeout(1, 10))
	assert.Equal(t, uint16(44), delta.DiskIOTimeout(300))

	own1 := delta.NewTiming(1, 60)
	own10 := delta.NewTiming(10, 60)
	free10 := diskfmt.Leader{IOTimeout: 10}
	p := delta.PlanAcquire(&free10, "h", own1)
	assert.Equal(t, delta.AcquirePlan{OtherIOTimeout: 10, Free: true, ShortDelay: 20}, p)

	free1 := diskfmt.Leader{IOTimeout: 1}
	p = delta.PlanAcquire(&free1, "h", own10)
	assert.Equal(t, delta.AcquirePlan{OtherIOTimeout: 1, Free: true, ShortDelay: 2}, p)

	held := diskfmt.Leader{IOTimeout: 1, Timestamp: 5, ResourceName: diskfmt.MustName("other")}
	p = delta.PlanAcquire(&held, "h", own10)
	assert.Equal(t, delta.AcquirePlan{OtherIOTimeout: 1, Wait: 68, ShortDelay: 2}, p)

	held.IOTimeout = 0 // old lease without io_timeout: our own value
	p = delta.PlanAcquire(&held, "h", own10)
	assert.Equal(t, delta.AcquirePlan{OtherIOTimeout: 10, Wait: 140, ShortDelay: 20}, p)

	mine := diskfmt.Leader{IOTimeout: 1, Timestamp: 5, ResourceName: diskfmt.MustName("h")}
	p = delta.PlanAcquire(&mine, "h", own10)
	assert.Equal(t, delta.AcquirePlan{OtherIOTimeout: 1, FastReacquire: true, ShortDelay: 2}, p)
}

// See docs/delta.md "Acquiring a host_id" step 8: snprintf-style name, old bytes kept after NUL.
func TestNewAcquireRecord(t *testing.T) {
	prev := diskfmt.Leader{
		Magic: diskfmt.DeltaMagic, Version: diskfmt.DeltaVersion, OwnerID: 7, OwnerGeneration: 4,
		ResourceName: diskfmt.MustName("a-very-long-previous-host-name.example"),
		IOTimeout:    10, WriteID: 1, WriteGeneration: 2, WriteTimestamp: 3, Timestamp: 99,
	}
	rec := delta.NewAcquireRecord(prev, 3, "hostC", 300, 1234)
	assert.Equal(t, uint64(3), rec.OwnerID)
	assert.Equal(t, uint64(5), rec.OwnerGeneration)
	assert.Equal(t, uint64(1234), rec.Timestamp)
	assert.Equal(t, uint16(44), rec.IOTimeout)
	assert.Equal(t, "hostC", diskfmt.NameString(rec.ResourceName[:]))
	assert.Equal(t, prev.ResourceName[6:], rec.ResourceName[6:], "tail after NUL kept")
	assert.Equal(t, [3]uint64{1, 2, 3}, [3]uint64{rec.WriteID, rec.WriteGeneration, rec.WriteTimestamp})
	assert.Equal(t, rec.ComputeChecksum(), rec.Checksum)

	long := "0123456789012345678901234567890123456789012345678901"
	rec = delta.NewAcquireRecord(prev, 3, long, 1, 1)
	assert.Equal(t, long[:47], diskfmt.NameString(rec.ResourceName[:]))
	assert.Equal(t, byte(0), rec.ResourceName[47])
	// A truncated name never fast-reacquires.
	assert.False(t, delta.PlanAcquire(&rec, long, delta.NewTiming(1, 0)).FastReacquire)
}

func sealed(l diskfmt.Leader, ss int) []byte {
	b := make([]byte, ss)
	l.Seal(b)
	return b
}

// See docs/delta.md "Acquiring a host_id" steps 7 and 10.
func TestAcquireDecisions(t *testing.T) {
	a := diskfmt.Leader{Magic: diskfmt.DeltaMagic, Timestamp: 10, OwnerID: 1, OwnerGeneration: 1}
	b := a
	b.Timestamp = 12
	free := a
	free.Timestamp = 0
	require.NoError(t, delta.CheckHeldLease(sealed(a, 512), sealed(a, 512)))
	require.NoError(t, delta.CheckHeldLease(sealed(a, 512), sealed(free, 512)))
	assert.Equal(t, rescode.ErrHostIDBusy, delta.CheckHeldLease(sealed(a, 512), sealed(b, 512)))
	// Any byte of the 200 counts, even outside the checksum.
	c := a
	c.WriteGeneration = 1
	assert.Equal(t, rescode.ErrHostIDBusy, delta.CheckHeldLease(sealed(a, 512), sealed(c, 512)))
	assert.NoError(t, delta.CheckAcquired(sealed(a, 512)[:200], sealed(a, 512)))
	assert.Equal(t, rescode.ErrHostIDBusy, delta.CheckAcquired(sealed(a, 512)[:200], sealed(b, 512)))
}

// See docs/delta.md "One renewal" steps 2–4.
func TestCheckRenewRecord(t *testing.T) {
	last := diskfmt.Leader{
		Magic: diskfmt.DeltaMagic, Version: diskfmt.DeltaVersion, SpaceName: diskfmt.MustName(space),
		OwnerID: 1, OwnerGeneration: 2, ResourceName: diskfmt.MustName("me"), Timestamp: 50,
	}
	last.Checksum = last.ComputeChecksum()
	_, err := delta.CheckRenewRecord(sealed(last, 512), space, &last, true)
	require.NoError(t, err)

	other := last
	other.ResourceName = diskfmt.MustName("you")
	_, err = delta.CheckRenewRecord(sealed(other, 512), space, &last, false)
	assert.Equal(t, rescode.ErrRenewOwner, err)
	other = last
	other.OwnerGeneration = 3
	_, err = delta.CheckRenewRecord(sealed(other, 512), space, &last, false)
	assert.Equal(t, rescode.ErrRenewOwner, err)

	diff := last
	diff.Timestamp = 0 // e.g. freed by `direct release_id`
	_, err = delta.CheckRenewRecord(sealed(diff, 512), space, &last, true)
	assert.Equal(t, rescode.ErrRenewDiff, err)
	_, err = delta.CheckRenewRecord(sealed(diff, 512), space, &last, false)
	assert.NoError(t, err, "no RENEW_DIFF after a failed attempt")

	marked := last
	marked.Flags |= diskfmt.LeaderDeadExt
	marked.Unused1 = diskfmt.DeadExtMark
	for _, prevOK := range []bool{true, false} {
		_, err = delta.CheckRenewRecord(sealed(marked, 512), space, &last, prevOK)
		assert.Equal(t, rescode.ErrDeadExt, err, "DEAD_EXT written by another host, prevOK %v", prevOK)
	}
	assert.True(t, delta.IsCorrupt(rescode.ErrDeadExt))

	_, err = delta.CheckRenewRecord(sealed(last, 512), "other", &last, true)
	assert.Equal(t, rescode.ErrLeaderLockspace, err)
	bad := sealed(last, 512)
	bad[20] ^= 1
	_, err = delta.CheckRenewRecord(bad, space, &last, true)
	assert.Equal(t, rescode.ErrLeaderChecksum, err)

	rec := delta.NewRenewRecord(last, 300, 77, delta.HostEvent{HostID: 9, Generation: 4, Event: 0x11, Data: 0x22})
	assert.Equal(t, uint64(77), rec.Timestamp)
	assert.Equal(t, uint16(44), rec.IOTimeout)
	assert.Equal(t, [3]uint64{4, 0x11, 0x22}, [3]uint64{rec.WriteID, rec.WriteGeneration, rec.WriteTimestamp})
	assert.Equal(t, rec.ComputeChecksum(), rec.Checksum)

	rel := delta.NewReleaseRecord(rec)
	assert.Zero(t, rel.Timestamp)
	assert.Equal(t, rec.OwnerGeneration, rel.OwnerGeneration)
	assert.Equal(t, rec.WriteGeneration, rel.WriteGeneration)
	assert.Equal(t, rel.ComputeChecksum(), rel.Checksum)
}

// See docs/delta.md "Own-lease check", "Corrupt lease".
func TestCheckOwnLease(t *testing.T) {
	for _, c := range []struct {
		io      int
		gap     uint64
		corrupt rescode.Code
		want    delta.OwnLeaseState
	}{
		{1, 0, 0, delta.OwnLeaseGood},
		{1, 5, 0, delta.OwnLeaseGood},
		{1, 6, 0, delta.OwnLeaseWarn},
		{1, 7, 0, delta.OwnLeaseWarn},
		{1, 8, 0, delta.OwnLeaseFailed},
		{10, 59, 0, delta.OwnLeaseGood},
		{10, 60, 0, delta.OwnLeaseWarn},
		{10, 80, 0, delta.OwnLeaseFailed},
		{10, 0, rescode.ErrRenewOwner, delta.OwnLeaseCorrupt},
	} {
		st, gap := delta.CheckOwnLease(1000+c.gap, 1000, c.corrupt, c.io)
		assert.Equal(t, c.want, st, "%+v", c)
		assert.Equal(t, c.gap, gap)
	}
	for _, c := range []rescode.Code{rescode.ErrRenewOwner, rescode.ErrRenewDiff, rescode.ErrLeaderMagic,
		rescode.ErrLeaderVersion, rescode.ErrLeaderSectorSize, rescode.ErrLeaderLockspace, rescode.ErrLeaderChecksum} {
		assert.True(t, delta.IsCorrupt(c), "%v", c)
	}
	assert.False(t, delta.IsCorrupt(rescode.ErrAIOTimeout))
	assert.False(t, delta.IsCorrupt(rescode.ErrEIO))
}

// See docs/delta.md "Host states" rules, in order.
func TestHostStateOf(t *testing.T) {
	const first = 100
	h := func(ts, owner uint64, io uint16, lastLive uint64) *delta.HostStatus {
		return &delta.HostStatus{Timestamp: ts, OwnerID: owner, IOTimeout: io, LastLive: lastLive}
	}
	for i, c := range []struct {
		h    *delta.HostStatus
		now  uint64
		want delta.HostState
	}{
		{h(0, 2, 1, 150), 150, delta.HostFree},
		{h(5, 1, 1, first), 1000, delta.HostLive}, // ourselves
		{h(5, 2, 1, first), first, delta.HostUnknown},
		{h(5, 2, 1, first), first + 8, delta.HostUnknown},
		{h(5, 2, 1, first), first + 9, delta.HostFail},
		{h(5, 2, 1, first), first + 68, delta.HostFail},
		{h(5, 2, 1, first), first + 69, delta.HostDead},
		{h(5, 2, 1, 120), 128, delta.HostLive},
		{h(5, 2, 1, 120), 129, delta.HostFail},
		{h(5, 2, 1, 120), 188, delta.HostFail},
		{h(5, 2, 1, 120), 189, delta.HostDead},
		{h(5, 2, 10, 120), 200, delta.HostLive},
		{h(5, 2, 10, 120), 201, delta.HostFail},
		{h(5, 2, 10, 120), 261, delta.HostDead},
		{h(5, 2, 0, first), first + 60, delta.HostFail}, // io 0 in the lease: fail 0, dead W
		{h(5, 2, 0, first), first + 61, delta.HostDead},
	} {
		assert.Equal(t, c.want, delta.HostStateOf(c.h, first, c.now, 1, 60), "case %d", i)
	}
	assert.Equal(t, "DEAD", delta.HostDead.String())
	assert.Equal(t, "ERROR", delta.HostState(9).String())

	// NO_TIMEOUT (5.x): never DEAD by time, FAIL for ever; DEAD_EXT: DEAD
	// at once, also when released (as 5.1.1 shows it), but never ourselves.
	nt := h(5, 2, 1, 120)
	nt.HostID, nt.Flags = 2, diskfmt.LeaderNoTimeout
	assert.Equal(t, delta.HostLive, delta.HostStateOf(nt, first, 128, 1, 60))
	assert.Equal(t, delta.HostFail, delta.HostStateOf(nt, first, 189, 1, 60))
	assert.Equal(t, delta.HostFail, delta.HostStateOf(nt, first, 100000, 1, 60))
	nt.Flags |= diskfmt.LeaderDeadExt
	assert.Equal(t, delta.HostDead, delta.HostStateOf(nt, first, 121, 1, 60))
	nt.Timestamp = 0
	assert.Equal(t, delta.HostDead, delta.HostStateOf(nt, first, 121, 1, 60))
	assert.Equal(t, delta.HostLive, delta.HostStateOf(&delta.HostStatus{HostID: 1, OwnerID: 1, Timestamp: 5,
		Flags: diskfmt.LeaderDeadExt}, first, 121, 1, 60), "ourselves")
	info := delta.HostInfo{State: delta.HostDead, DeadExt: true}
	assert.Equal(t, uint32(0x15), info.Flags(), "5.1.1's host_flags for a DEAD_EXT host")
}

// See docs/delta.md "Renewal history".
func TestHistory(t *testing.T) {
	h := delta.NewHistory(3)
	assert.Empty(t, h.Entries())
	h.Success(465, 0, 0)
	h.Failure(rescode.ErrAIOTimeout)
	h.Failure(rescode.ErrEIO)
	h.Failure(rescode.ErrEIO)
	h.Success(470, 1, 2)
	es := h.Entries()
	require.Len(t, es, 2)
	assert.Equal(t, "timestamp=465 read_ms=0 write_ms=0 next_timeouts=1 next_errors=2", es[0].String())
	assert.Equal(t, "timestamp=470 read_ms=1 write_ms=2 next_timeouts=0 next_errors=0", es[1].String())

	h.Success(472, 0, 0)
	h.Success(475, 0, 0) // wraps onto slot 0; its counters are kept (C behaviour)
	es = h.Entries()
	require.Len(t, es, 3)
	assert.Equal(t, []uint64{470, 472, 475}, []uint64{es[0].Timestamp, es[1].Timestamp, es[2].Timestamp})
	assert.Equal(t, 1, es[2].NextTimeouts)

	assert.Empty(t, delta.NewHistory(0).Entries())
	one := delta.NewHistory(1)
	one.Success(5, 0, 0)
	assert.Empty(t, one.Entries(), "prev == next == 0 lists nothing")
}

// See docs/delta.md "Sending requests and events", "set_event".
func TestNotifier(t *testing.T) {
	n := delta.NewNotifier(2000, 6)
	require.NoError(t, n.Request(9, 100))
	bm, ev := n.Build(100, 1)
	assert.Equal(t, byte(0x01), bm[1], "host 9 is byte 1 bit 0")
	assert.Zero(t, ev)
	bm, _ = n.Build(106, 1)
	assert.Equal(t, byte(0x01), bm[1], "still set at exactly set_bitmap_seconds")
	bm, _ = n.Build(107, 1)
	assert.Equal(t, byte(0), append(bm, make([]byte, 2)...)[1], "expired")
	assert.Nil(t, bm, "no bit set: no bitmap to write")
	assert.Empty(t, n.Pending())

	assert.Equal(t, rescode.ErrEINVAL, n.Request(0, 1))
	assert.Equal(t, rescode.ErrEINVAL, n.Request(2001, 1))
	small := delta.NewNotifier(250, 6)
	assert.Equal(t, rescode.ErrEINVAL, small.Request(251, 1))

	// set_event and the -EBUSY clash window.
	gen := func(id uint64) uint64 { return 40 + id }
	require.NoError(t, n.SetEvent(200, delta.HostEvent{HostID: 2, Event: 5, Data: 7}, delta.SetEventCurGeneration, gen))
	assert.Equal(t, delta.HostEvent{HostID: 2, Generation: 42, Event: 5, Data: 7}, n.Event())
	err := n.SetEvent(201, delta.HostEvent{HostID: 3, Event: 6}, 0, gen)
	assert.Equal(t, rescode.Code(-16), rescode.CodeOf(err))
	// The same event value to another host is fine; the extras are shared.
	require.NoError(t, n.SetEvent(201, delta.HostEvent{HostID: 3, Event: 5, Data: 7}, 0, gen))
	assert.Equal(t, []uint64{2, 3}, n.Pending())
	require.NoError(t, n.SetEvent(202, delta.HostEvent{HostID: 3, Event: 6}, delta.SetEventReplaceEvent, gen))
	assert.Equal(t, uint64(6), n.Event().Event)
	// After set_bitmap_seconds a different event is accepted.
	require.NoError(t, n.SetEvent(208, delta.HostEvent{HostID: 4, Event: 8}, 0, gen))
	require.NoError(t, n.SetEvent(209, delta.HostEvent{HostID: 4}, delta.SetEventClearHostID, gen))
	assert.Equal(t, []uint64{2, 3}, n.Pending())
	require.NoError(t, n.SetEvent(209, delta.HostEvent{HostID: 4}, delta.SetEventClearEvent, gen))
	assert.Zero(t, n.Event())
	require.NoError(t, n.SetEvent(210, delta.HostEvent{HostID: 5, Event: 1}, delta.SetEventAllHosts, gen))
	assert.Len(t, n.Pending(), 2000)
	bm, _ = n.Build(210, 1)
	assert.Equal(t, byte(0xFE), bm[0], "all hosts but ourselves")
	assert.Equal(t, rescode.ErrEINVAL, n.SetEvent(210, delta.HostEvent{HostID: 0}, 0, gen))
}
