package delta_test

import (
	"testing"

	"github.com/gosanlock/gosanlock/delta"
	"github.com/gosanlock/gosanlock/diskfmt"
)

// idleArea is a formatted 1 MiB lockspace (512-byte sectors, 2000 hosts)
// where hosts 1..live hold their lease with timestamp ts.
func idleArea(b testing.TB, live int, ts uint64) ([]byte, diskfmt.Geometry) {
	g := diskfmt.Geometry{SectorSize: 512, AlignSize: 1 << 20, MaxHosts: 2000}
	area, _, err := diskfmt.InitDeltaArea(diskfmt.DeltaInit{Geometry: g, SpaceName: "LS", IOTimeout: 1})
	if err != nil {
		b.Fatal(err)
	}
	for i := 1; i <= live; i++ {
		sec := area[(i-1)*512 : i*512]
		l, _ := diskfmt.DecodeLeader(sec)
		l.Magic, l.OwnerID, l.OwnerGeneration, l.Timestamp = diskfmt.DeltaMagic, uint64(i), 1, ts
		copy(l.ResourceName[:], "host")
		l.Seal(sec)
	}
	return area, g
}

// BenchmarkProcessIdle is one pass over a renewal read of an idle
// lockspace in which only the live hosts' timestamps moved.
func BenchmarkProcessIdle(b *testing.B) {
	for _, live := range []int{1, 64} {
		b.Run(map[int]string{1: "live1", 64: "live64"}[live], func(b *testing.B) {
			a1, g := idleArea(b, live, 100)
			a2, _ := idleArea(b, live, 101)
			t := delta.NewHostTable(g.MaxHosts)
			t.Process(1, a1, g, "LS", 1, 6)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				a := a1
				if i%2 == 1 {
					a = a2
				}
				t.Process(uint64(i+2), a, g, "LS", 1, 6)
			}
		})
	}
}

// BenchmarkStageCold is Stage over a renewal read that is in no CPU cache,
// as after the disk wrote it: with and without the first pass that touches
// every record (touchRecords).
func BenchmarkStageCold(b *testing.B) {
	evict := make([]byte, 64<<20)
	for _, touch := range []bool{false, true} {
		b.Run(map[bool]string{false: "compare", true: "touch-first"}[touch], func(b *testing.B) {
			a1, g := idleArea(b, 4, 100)
			a2, _ := idleArea(b, 4, 101)
			t := delta.NewHostTable(g.MaxHosts)
			delta.SetStageTouchFirst(t, touch)
			t.Process(1, a1, g, "LS", 1, 6)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				for j := 0; j < len(evict); j += 64 {
					evict[j]++
				}
				a := a1
				if i%2 == 1 {
					a = a2
				}
				b.StartTimer()
				t.Process(uint64(i+2), a, g, "LS", 1, 6)
			}
		})
	}
}
