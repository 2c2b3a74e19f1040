package serving

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/wire"
)

func TestRestartable(t *testing.T) {
	for _, c := range []struct {
		cmd   wire.Cmd
		flags uint32
		want  bool
	}{
		{wire.CmdAddLockspace, 0, true},
		{wire.CmdAddLockspace, wire.AddAsync, false},
		{wire.CmdAcquire, 0, true}, // until its first write (WriteGuarded)
		{wire.CmdInqLockspace, wire.InqWait, true},
		{wire.CmdInqLockspace, 0, false},
		{wire.CmdConvert, 0, true}, // until its first write (WriteGuarded)
		{wire.CmdRelease, 0, false},
		{wire.CmdRemLockspace, 0, false},
	} {
		assert.Equal(t, c.want, Restartable(wire.NewRequest(c.cmd, c.flags, 0, 0)), "%v flags %#x", c.cmd, c.flags)
	}
}

func TestDecodePending(t *testing.T) {
	q := wire.NewRequest(wire.CmdAddLockspace, 0, 3, 0)
	q.Lockspace = &wire.Lockspace{Name: "LS", HostID: 1, Disk: wire.Disk{Path: "/dev/x"}}
	raw, err := q.MarshalBinary()
	require.NoError(t, err)
	got, err := DecodePending(raw)
	require.NoError(t, err)
	assert.Equal(t, "LS", got.Lockspace.Name)
	_, err = DecodePending(raw[:len(raw)-1])
	assert.Error(t, err, "short")
	_, err = DecodePending(append(raw, 0))
	assert.Error(t, err, "trailing byte")
	rel, err := wire.NewRequest(wire.CmdRemLockspace, 0, 0, 0).MarshalBinary()
	require.NoError(t, err)
	_, err = DecodePending(rel)
	assert.Error(t, err, "not restartable")
}

func reply(result int32) []byte {
	h := wire.ResultReply(wire.NewHeader(wire.CmdAcquire, 0, 0, 0), result)
	return h.Bytes()
}

func TestSlot(t *testing.T) {
	cause := errors.New("handover")
	raw := []byte("request")

	// Not cancelled: writes go out, nothing is kept.
	var s Slot
	ctx := s.Start(context.Background(), raw)
	assert.False(t, s.Hold(reply(0)))
	redo, _, held := s.End(nil)
	assert.False(t, redo)
	assert.Empty(t, held)
	assert.Error(t, ctx.Err(), "ended")

	// Cancelled, answered with a failure: dropped and kept to run again.
	ctx = s.Start(context.Background(), raw)
	s.Cancel(cause)
	assert.ErrorIs(t, context.Cause(ctx), cause)
	assert.True(t, s.Hold(reply(-201)))
	redo, got, held := s.End(nil)
	assert.True(t, redo)
	assert.Equal(t, raw, got)
	assert.Empty(t, held)

	// Cancelled, but it had succeeded: the reply is sent.
	s.Start(context.Background(), raw)
	s.Cancel(cause)
	assert.True(t, s.Hold(reply(0)))
	redo, _, held = s.End(nil)
	assert.False(t, redo)
	assert.Equal(t, [][]byte{reply(0)}, held)

	// A reply already written: the cancel does nothing.
	ctx = s.Start(context.Background(), raw)
	assert.False(t, s.Hold(reply(-11)))
	s.Cancel(cause)
	assert.NoError(t, ctx.Err())
	redo, _, held = s.End(nil)
	assert.False(t, redo)
	assert.Empty(t, held)

	// An empty slot: nothing to hold or cancel.
	assert.False(t, s.Hold(reply(0)))
	s.Cancel(cause)
	redo, _, _ = s.End(nil)
	assert.False(t, redo)
}

// TestSlotGuarded: a guarded request (an acquire) is cancelled only
// before its first disk write, and no write goes out once it is
// cancelled (docs/upgrade.md "Pending requests").
func TestSlotGuarded(t *testing.T) {
	cause := errors.New("handover")
	raw := []byte("request")
	var s Slot

	// Cancelled before any write: its writes are refused, it is redone.
	ctx := s.StartGuarded(context.Background(), raw)
	g := s.Guard()
	require.NotNil(t, g)
	s.Cancel(cause)
	assert.ErrorIs(t, context.Cause(ctx), cause)
	assert.False(t, g.BeforeWrite(), "a cancelled request writes nothing")
	assert.True(t, s.Hold(reply(-1)))
	redo, got, _ := s.End(nil)
	assert.True(t, redo)
	assert.Equal(t, raw, got)

	// Written first: the cancel does nothing, the reply goes out.
	ctx = s.StartGuarded(context.Background(), raw)
	g = s.Guard()
	assert.True(t, g.BeforeWrite())
	s.Cancel(cause)
	assert.NoError(t, ctx.Err(), "a request that has written is not cancelled")
	assert.True(t, g.BeforeWrite())
	assert.False(t, s.Hold(reply(0)))
	redo, _, held := s.End(nil)
	assert.False(t, redo)
	assert.Empty(t, held)

	// Unguarded: there is no guard to ask.
	s.Start(context.Background(), raw)
	assert.Nil(t, s.Guard())
	s.Cancel(cause)
	s.End(nil)
	assert.Nil(t, s.Guard(), "an empty slot has no guard")
}
