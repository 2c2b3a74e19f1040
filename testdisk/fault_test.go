package testdisk

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/rescode"
)

func sector(n int, b byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = b
	}
	return p
}

func TestFaultStringRoundTrip(t *testing.T) {
	c := Chain{
		ErrorBefore(0.01),
		Writes(ErrorAfter(0.02)),
		HangIO(0.001),
		TornWrite(0.5),
		Latency(0.3, Exp{Mean: 5 * time.Millisecond, Max: 2 * time.Second}),
		OnHost(2, Reads(Latency(1, Uniform{Min: time.Second, Max: 3 * time.Second}))),
	}
	s := c.String()
	require.Equal(t, "err-before:0.01,writes(err-after:0.02),hang:0.001,torn:0.5,latency:0.3:exp:5ms:2s,host2(reads(latency:1:uniform:1s:3s))", s)
	p, err := ParseFaults(s)
	require.NoError(t, err)
	require.Equal(t, s, p.String())
	for _, bad := range []string{"nope:1", "err-before:2", "latency:0.1:exp:x:1s", "hostX(hang:1)", "hang"} {
		_, err := ParseFaults(bad)
		require.Error(t, err, bad)
	}
	none, err := ParseFaults("")
	require.NoError(t, err)
	require.Empty(t, none)
}

// The same seed gives the same decisions for the same calls.
func TestDecideDeterministic(t *testing.T) {
	inj := Chain{ErrorBefore(0.1), ErrorAfter(0.1), HangIO(0.1), TornWrite(0.5), Latency(0.5, Exp{Mean: time.Millisecond})}
	run := func(seed uint64) []Outcome {
		d := NewDisk(NewMem(1<<20, 512), inj, seed)
		var out []Outcome
		for i := range 1000 {
			_, o := d.Decide(OpKind(i%2), i%3, int64(i%8)*512, 512*(1+i%4))
			out = append(out, o)
		}
		return out
	}
	a := run(7)
	require.Equal(t, a, run(7))
	require.NotEqual(t, a, run(8))
	seen := map[Fault]bool{}
	for _, o := range a {
		seen[o.Fault] = true
	}
	for _, f := range []Fault{NoFault, ErrBefore, ErrAfter, Hang, Torn} {
		require.True(t, seen[f], "fault %v never chosen", f)
	}
}

// Each fault's data effect: before (nothing), after (landed, error), torn
// (some sectors), hang (lands or not, per Land). Single-sector writes are
// never torn.
func TestApplyEffects(t *testing.T) {
	const ss = 512
	m := NewMem(8*ss, ss)
	d := NewDisk(m, nil, 1)
	op := Op{Kind: OpWrite, Off: 0, Len: 4 * ss, Sectors: 4}
	data := sector(4*ss, 0xaa)

	require.ErrorIs(t, d.Apply(op, Outcome{Fault: ErrBefore}, data), ErrInjected)
	require.Equal(t, make([]byte, 8*ss), m.Bytes())

	require.ErrorIs(t, d.Apply(op, Outcome{Fault: Torn, Land: 0b0101}, data), ErrInjected)
	b := m.Bytes()
	require.Equal(t, sector(ss, 0xaa), b[0:ss])
	require.Equal(t, make([]byte, ss), b[ss:2*ss])
	require.Equal(t, sector(ss, 0xaa), b[2*ss:3*ss])
	require.Equal(t, make([]byte, ss), b[3*ss:4*ss])

	require.NoError(t, d.Apply(op, Outcome{Fault: Hang}, sector(4*ss, 0xbb)))
	require.Equal(t, b, m.Bytes(), "a hang without Land changes nothing")
	require.NoError(t, d.Apply(op, Outcome{Fault: Hang, Land: 1}, sector(4*ss, 0xbb)))
	require.Equal(t, sector(4*ss, 0xbb), m.Bytes()[:4*ss])

	require.ErrorIs(t, d.Apply(op, Outcome{Fault: ErrAfter}, sector(4*ss, 0xcc)), ErrInjected)
	require.Equal(t, sector(4*ss, 0xcc), m.Bytes()[:4*ss])

	read := make([]byte, 4*ss)
	rop := Op{Kind: OpRead, Off: 0, Len: 4 * ss, Sectors: 4}
	require.ErrorIs(t, d.Apply(rop, Outcome{Fault: ErrBefore}, read), ErrInjected)
	require.Equal(t, make([]byte, 4*ss), read)
	require.NoError(t, d.Apply(rop, Outcome{}, read))
	require.Equal(t, sector(4*ss, 0xcc), read)

	// torn never applies to one sector
	r := rand.New(rand.NewPCG(1, 2))
	for range 100 {
		var o Outcome
		TornWrite(1).Inject(Op{Kind: OpWrite, Len: ss, Sectors: 1}, r, &o)
		require.Equal(t, NoFault, o.Fault)
		TornWrite(1).Inject(Op{Kind: OpWrite, Len: 3 * ss, Sectors: 3}, r, &o)
		require.Equal(t, Torn, o.Fault)
		require.NotEqual(t, uint64(0b111), o.Land, "a torn write must miss a sector")
	}
}

// Port runs the decisions on package time: latency delays, a hang blocks
// until the context deadline, a cut host gets nothing through.
func TestPortTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ss = 512
		m := NewMem(8*ss, ss)
		d := NewDisk(m, Latency(1, Uniform{Min: 300 * time.Millisecond, Max: 300*time.Millisecond + 1}), 1)
		p := d.Port(1)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		require.NoError(t, p.WriteAt(ctx, sector(ss, 1), 0))
		require.Equal(t, 300*time.Millisecond, time.Since(start))

		slow := NewDisk(m, Latency(1, Uniform{Min: 5 * time.Second, Max: 5*time.Second + 1}), 1).Port(1)
		start = time.Now()
		err := slow.WriteAt(ctx, sector(ss, 2), ss)
		require.ErrorIs(t, err, rescode.ErrIOTimeout)
		require.Equal(t, 700*time.Millisecond, time.Since(start))
		require.Equal(t, make([]byte, ss), m.Bytes()[ss:2*ss], "a call that timed out in its latency never lands")

		hang := NewDisk(m, HangIO(1), 3)
		ctx2, cancel2 := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel2()
		start = time.Now()
		require.ErrorIs(t, hang.Port(1).ReadAt(ctx2, make([]byte, ss), 0), rescode.ErrIOTimeout)
		require.Equal(t, 2*time.Second, time.Since(start))
		require.Equal(t, uint64(1), hang.Stats().Faults[Hang])

		cut := NewDisk(m, nil, 4)
		cut.SetCut(1, true)
		for range 10 {
			ctx3, cancel3 := context.WithTimeout(context.Background(), time.Second)
			err := cut.Port(1).WriteAt(ctx3, sector(ss, 9), 2*ss)
			cancel3()
			require.True(t, errors.Is(err, ErrInjected) || errors.Is(err, rescode.ErrIOTimeout), "%v", err)
		}
		require.Equal(t, make([]byte, ss), m.Bytes()[2*ss:3*ss])
		require.NoError(t, cut.Port(2).WriteAt(context.Background(), sector(ss, 9), 2*ss), "other hosts are not cut")
		require.Equal(t, uint64(10), cut.Stats().Cut)
	})
}
