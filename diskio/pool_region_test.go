package diskio

import (
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// resident counts the resident pages of b (mincore).
func resident(t *testing.T, b []byte) int {
	t.Helper()
	vec := make([]byte, (len(b)+4095)/4096)
	_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), uintptr(unsafe.Pointer(unsafe.SliceData(vec))))
	if e != 0 {
		t.Fatalf("mincore: %v", e)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// TestPoolColdRegionWhole: a huge-page region's pages go back only when
// every buffer cut from it is free, all at once; one half of a region is
// never dropped (that would split its huge page for good).
func TestPoolColdRegionWhole(t *testing.T) {
	const size = 1 << 20
	blocks, r := hugeBlocks(size)
	if blocks == nil {
		t.Skip("no anonymous mapping for a region")
	}
	if len(blocks) != 2 || r.blocks != 2 || len(r.mem) != 2*size ||
		unsafe.SliceData(r.mem) != unsafe.SliceData(blocks[0]) {
		t.Fatalf("region of %d blocks (%d recorded), %d bytes", len(blocks), r.blocks, len(r.mem))
	}
	a := &Buf{b: blocks[0], class: int8(classOf(size)), region: r}
	b := &Buf{b: blocks[1], class: int8(classOf(size)), region: r}
	for _, x := range [][]byte{a.b, b.b} {
		for i := 0; i < len(x); i += 4096 {
			x[i] = 1
		}
	}
	p := &bufClass{keep: 8}
	p.free = []*Buf{a} // b is out
	p.dropPagesLocked()
	if a.cold || resident(t, a.b) != size/4096 {
		t.Fatalf("half a region dropped while its other buffer is out: cold %v, %d pages resident", a.cold, resident(t, a.b))
	}
	p.free = append(p.free, b)
	p.dropPagesLocked()
	if !a.cold || !b.cold || resident(t, r.mem) != 0 {
		t.Fatalf("whole region free: cold %v %v, %d pages resident", a.cold, b.cold, resident(t, r.mem))
	}
	// One buffer used again (warm), the other still cold: the region is
	// all free again, so it goes back once more.
	a.cold = false
	a.b[0] = 1
	p.dropPagesLocked()
	if !a.cold || resident(t, r.mem) != 0 {
		t.Fatalf("re-used half of a free region: cold %v, %d pages resident", a.cold, resident(t, r.mem))
	}
	// A buffer the pool let go of (trimmed) no longer holds the region:
	// the other one, free, takes the whole region's pages back with it.
	a.cold, b.cold = false, false
	a.b[0], b.b[0] = 1, 1
	p.free = []*Buf{a, b}
	p.low = 2
	p.trimAt = time.Now()
	if d := p.trimLocked(time.Now()); d != 1 || r.gone != 1 {
		t.Fatalf("trim dropped %d, region counts %d gone; want 1, 1", d, r.gone)
	}
	p.dropPagesLocked()
	if !a.cold || resident(t, r.mem) != 0 {
		t.Fatalf("free half of a region whose other half was trimmed: cold %v, %d pages resident", a.cold, resident(t, r.mem))
	}
}

// TestPoolFirstReleaseWarm: a class's first release ever keeps its pages
// (there is no gap to call sparse use).
func TestPoolFirstReleaseWarm(t *testing.T) {
	const n = 4 << 20
	p := &bufPool[classOf(n)]
	p.mu.Lock()
	p.lastRelease = time.Time{}
	p.mu.Unlock()
	b := GetBuf(n)
	b.Bytes()[0] = 7
	b.Release()
	if b.cold || b.Bytes()[0] != 7 {
		t.Fatalf("first release of the class: cold %v, first byte %d", b.cold, b.Bytes()[0])
	}
}
