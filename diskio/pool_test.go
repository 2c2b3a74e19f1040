package diskio

import (
	"testing"
	"time"
)

// TestPoolTrim: buffers that sat unused for a whole trim period are
// dropped; those the period's load needed stay.
func TestPoolTrim(t *testing.T) {
	p := &bufClass{keep: 8}
	t0 := time.Now()
	for range 8 {
		p.free = append(p.free, &Buf{b: make([]byte, 1), class: -1})
	}
	p.trimLocked(t0) // starts a period with 8 free
	if len(p.free) != 8 || p.low != 8 {
		t.Fatalf("after the first trim: %d free, low %d; want 8, 8", len(p.free), p.low)
	}
	// The period's load: two buffers in use at once, at most. The six
	// unused ones go but one.
	p.low = min(p.low, 6)
	if d := p.trimLocked(t0.Add(poolTrimPeriod)); d != 5 || len(p.free) != 3 {
		t.Fatalf("after a period needing 2: dropped %d, %d free; want 5, 3", d, len(p.free))
	}
	// A period in which nothing was taken leaves one buffer.
	p.trimLocked(t0.Add(2 * poolTrimPeriod))
	if len(p.free) != 1 {
		t.Fatalf("after an unused period: %d free, want 1", len(p.free))
	}
	p.trimLocked(t0.Add(3 * poolTrimPeriod))
	if len(p.free) != 1 {
		t.Fatalf("after two unused periods: %d free, want 1", len(p.free))
	}
}

// TestPoolRelease: Get and Release through the real pool keep the free
// list within keep and account the low-water mark.
func TestPoolRelease(t *testing.T) {
	const n = 1 << 20
	bs := make([]*Buf, 3)
	for i := range bs {
		bs[i] = GetBuf(n)
	}
	for _, b := range bs {
		b.Release()
	}
	p := &bufPool[classOf(n)]
	p.mu.Lock()
	free, keep := len(p.free), p.keep
	p.mu.Unlock()
	if free < 1 || free > keep {
		t.Fatalf("%d free after releasing 3 buffers, keep %d", free, keep)
	}
	b := GetBuf(n)
	p.mu.Lock()
	low, left := p.low, len(p.free)
	p.mu.Unlock()
	b.Release()
	if low > left {
		t.Fatalf("low %d above the %d free after a Get", low, left)
	}
}

// TestPoolColdPages: a release after a quiet second gives the pages of
// the free buffers of a large class back (they stay pooled, and read as
// zero afterwards); releases in quick succession keep them; GetBuf hands
// a cold buffer out as usual.
func TestPoolColdPages(t *testing.T) {
	const n = 1 << 20
	p := &bufPool[classOf(n)]
	b := GetBuf(n)
	for i := range b.Bytes() {
		b.Bytes()[i] = 0xa5
	}
	p.mu.Lock()
	p.lastRelease = time.Now().Add(-2 * coldGap)
	p.mu.Unlock()
	b.Release() // sparse: its pages go
	if !b.cold {
		t.Fatal("released after a quiet period: not cold")
	}
	for i, c := range b.b {
		if c != 0 {
			t.Fatalf("cold buffer byte %d = %#x, want 0", i, c)
		}
	}
	// A release right after another one: the class is in use, the
	// released buffer keeps its pages.
	b2 := GetBuf(n)
	if b2.cold {
		t.Fatal("GetBuf handed out a buffer still marked cold")
	}
	b2.Bytes()[0] = 1
	b2.Release()
	if b2.cold || b2.Bytes()[0] != 1 {
		t.Fatalf("released within %v of the previous release: cold=%v, first byte %d", coldGap, b2.cold, b2.Bytes()[0])
	}
	// Small classes never go cold.
	s := GetBuf(4096)
	sp := &bufPool[classOf(4096)]
	sp.mu.Lock()
	sp.lastRelease = time.Now().Add(-2 * coldGap)
	sp.mu.Unlock()
	s.Release()
	if s.cold {
		t.Fatal("a 4 KiB buffer went cold")
	}
}
