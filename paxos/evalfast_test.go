package paxos

import (
	"encoding/binary"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/gosanlock/gosanlock/diskfmt"
)

// randomBallotBuf builds a ballot read of n slots: most zero, some zero
// but with a mode block (shared or not), some sealed dblocks of various
// lvers and mbals, some with a bad checksum, some with only the fields
// IsZero ignores (inp2, inp3, flags) set.
func randomBallotBuf(r *rand.Rand, ss int, n uint64) []byte {
	buf := make([]byte, (2+n)*uint64(ss))
	for id := uint64(1); id <= n; id++ {
		b := buf[(1+id)*uint64(ss):]
		switch r.IntN(10) {
		case 0, 1:
			d := diskfmt.Dblock{Mbal: r.Uint64N(5), Bal: r.Uint64N(5), Inp: r.Uint64N(3), Inp2: 1, Inp3: 2, Lver: r.Uint64N(4), Flags: r.Uint32N(2)}
			d.Seal(b)
		case 2:
			d := diskfmt.Dblock{Mbal: 1 + r.Uint64N(5), Lver: r.Uint64N(4)}
			d.Seal(b)
			b[3] ^= 0x40 // checksum mismatch
		case 3:
			binary.LittleEndian.PutUint64(b[24:], r.Uint64()) // inp2 only
			binary.LittleEndian.PutUint32(b[52:], r.Uint32()) // flags
		}
		if r.IntN(6) == 0 {
			m := diskfmt.ModeBlock{Flags: r.Uint32N(4), Generation: r.Uint64N(9)}
			m.Encode(b[diskfmt.ModeBlockOffset:])
		}
	}
	return buf
}

// TestEvalBallotBufMatchesDecode: the zero-dblock shortcut of EvalBallotBuf
// and MaxMbalFull gives what decoding every slot gives, for random reads,
// both phases, nextLver 0 included, and reads shorter than the slots.
func TestEvalBallotBufMatchesDecode(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 10))
	for i := range 3000 {
		ss := 512
		if i%7 == 0 {
			ss = 4096
		}
		n := 1 + r.Uint64N(40)
		buf := randomBallotBuf(r, ss, n)
		if i%11 == 0 {
			buf = buf[:len(buf)-r.IntN(2*ss)]
		}
		nextLver, mbal := r.Uint64N(4), r.Uint64N(6)
		for _, phase1 := range []bool{true, false} {
			want, werr := EvalBallotRead(DecodeSlots(buf, ss, n), nextLver, mbal, phase1)
			got, gerr := EvalBallotBuf(buf, ss, n, nextLver, mbal, phase1)
			if werr != gerr || !reflect.DeepEqual(want, got) {
				t.Fatalf("case %d phase1 %v: decode %+v %v, buf %+v %v", i, phase1, want, werr, got, gerr)
			}
		}
		if uint64(len(buf)) >= (2+n)*uint64(ss) {
			wantM, werr := maxMbalDecoded(buf, ss, n)
			gotM, gerr := MaxMbalFull(buf, ss, n)
			if wantM != gotM || (werr == nil) != (gerr == nil) {
				t.Fatalf("case %d: MaxMbalFull %d %v, decoded %d %v", i, gotM, gerr, wantM, werr)
			}
		}
	}
}

// maxMbalDecoded is MaxMbalFull decoding every dblock.
func maxMbalDecoded(buf []byte, ss int, n uint64) (uint64, error) {
	var m uint64
	for q := uint64(0); q < n; q++ {
		d, err := diskfmt.DecodeDblock(buf[(2+q)*uint64(ss):])
		if err != nil {
			return 0, err
		}
		m = max(m, d.Mbal)
	}
	return m, nil
}

// BenchmarkEvalBallotBufOneHost2000 is the usual ballot read: 2000 slots,
// one host's dblock in use.
func BenchmarkEvalBallotBufOneHost2000(b *testing.B) {
	const n = 2000
	ss := 512
	buf := make([]byte, (2+n)*ss)
	d := diskfmt.Dblock{Mbal: 1, Bal: 1, Inp: 1, Lver: 7}
	d.Seal(buf[2*ss:])
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EvalBallotBuf(buf, ss, n, 7, 1<<40, true); err != nil {
			b.Fatal(err)
		}
		if _, err := MaxMbalFull(buf, ss, n); err != nil {
			b.Fatal(err)
		}
	}
}
