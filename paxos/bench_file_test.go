package paxos

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/diskfmt"
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
	dev, err := diskfmt.OpenFile(path)
	if err != nil {
		b.Skipf("O_DIRECT: %v", err)
	}
	defer dev.Close()
	w := newWorld()
	w.join(1, 1)
	clock := delta.NewClockAt(1000 * time.Second)
	h := &Host{
		ID: 1, Generation: 1, Space: testSpace, Geometry: g,
		IOTimeout: 10, WatchdogFireTimeout: testW, ShRetries: DefaultShRetries,
		Clock: clock, Rand: rand.New(rand.NewPCG(1, 42)),
		Live: &view{w: w, clock: clock, first: delta.Monotime(clock)},
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
