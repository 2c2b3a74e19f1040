package paxos

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/diskio"
)

// BenchmarkAcquireReleaseFile is one uncontended exclusive acquire + release
// through the paxos layer on a real file opened O_DIRECT|O_SYNC (under
// /var/tmp: tmpfs has no O_DIRECT), 2000 dblocks at 512/1M: the I/O sequence
// of a daemon acquire without the socket. Profile it with
//
//	go test ./paxos -run '^$' -bench AcquireReleaseFile -benchmem -cpuprofile cpu.out -memprofile mem.out
func BenchmarkAcquireReleaseFile(b *testing.B) {
	dir, err := os.MkdirTemp("/var/tmp", "gs-paxos-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	path := dir + "/leases"
	g := geo512
	area, err := diskfmt.InitPaxosArea(diskfmt.PaxosInit{Geometry: g, SpaceName: testSpace, ResourceName: testRes})
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, append(make([]byte, 0, 2*len(area)), append(area, make([]byte, g.AlignSize)...)...), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, mode := range []struct {
		name string
		open func(string) (*diskio.File, error)
	}{{"aio", diskio.OpenFile}, {"sync", diskio.OpenFileSync}} {
		b.Run(mode.name, func(b *testing.B) {
			dev, err := mode.open(path)
			if err != nil {
				b.Skipf("O_DIRECT: %v", err)
			}
			defer dev.Close()
			benchAcquireRelease(b, dev, g)
		})
	}
}

func benchAcquireRelease(b *testing.B, dev diskfmt.Device, g diskfmt.Geometry) {
	w := newWorld()
	w.join(1, 1)
	clk := clock.NewAt(1000 * time.Second)
	h := &Host{
		ID: 1, Generation: 1, Space: testSpace, Geometry: g,
		IOTimeout: 10, WatchdogFireTimeout: testW, ShRetries: DefaultShRetries,
		Clock: clk, Rand: rand.New(rand.NewPCG(1, 42)),
		Live: &view{w: w, clock: clk, first: clock.Monotime(clk)},
	}
	l := &Lease{Host: h, Name: testRes, Disks: []Disk{{Dev: dev, Offset: 0}}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		held, err := l.Acquire(bg, AcquireRequest{})
		if err != nil {
			b.Fatal(fmt.Errorf("acquire %d: %w", i, err))
		}
		if err := held.Release(bg, ReleaseOptions{}); err != nil {
			b.Fatal(fmt.Errorf("release %d: %w", i, err))
		}
	}
}

// TestEvalBallotBufNoAlloc: evaluating a ballot read of 2000 dblocks
// decodes them in place, without allocating.
func TestEvalBallotBufNoAlloc(t *testing.T) {
	const n = 2000
	ss := 512
	buf := make([]byte, (2+n)*ss)
	for id := uint64(1); id <= n; id++ {
		d := diskfmt.Dblock{Mbal: id, Bal: id, Inp: id, Inp2: 1, Inp3: 2, Lver: 7}
		d.Seal(buf[(1+id)*uint64(ss):])
	}
	var r PhaseResult
	allocs := testing.AllocsPerRun(20, func() {
		var err error
		r, err = EvalBallotBuf(buf, ss, n, 7, 1<<40, true)
		if err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per evaluation", allocs)
	}
	if !r.HaveBest || r.Best.Bal != n {
		t.Fatalf("best %+v", r)
	}
	want, err := EvalBallotRead(DecodeSlots(buf, ss, n), 7, 1<<40, true)
	if err != nil || want.Best != r.Best {
		t.Fatalf("EvalBallotRead %+v %v, EvalBallotBuf %+v", want, err, r)
	}
}

func BenchmarkEvalBallotBuf2000(b *testing.B) {
	const n = 2000
	ss := 512
	buf := make([]byte, (2+n)*ss)
	for id := uint64(1); id <= n; id++ {
		d := diskfmt.Dblock{Mbal: id, Bal: id, Inp: id, Lver: 7}
		d.Seal(buf[(1+id)*uint64(ss):])
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EvalBallotBuf(buf, ss, n, 7, 1<<40, true); err != nil {
			b.Fatal(err)
		}
	}
}
