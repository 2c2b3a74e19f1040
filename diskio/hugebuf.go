package diskio

import (
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Huge-page buffers (docs/performance.md "Huge-page buffers").
// An O_DIRECT read of 1 MiB into ordinary 4 KiB pages makes the kernel pin
// 256 pages and hand the device 256 segments; into one 2 MiB transparent
// huge page it pins one folio and the segments merge. Measured here, that
// halves the system time of the read and more than halves its latency. So
// the pool's buffers of 1 MiB and more (the lockspace area read by every
// renewal, the resource area read by every ballot) come from anonymous
// mappings aligned to 2 MiB and marked MADV_HUGEPAGE, cut into buffers of
// their class (two of 1 MiB per region; a larger buffer spans whole huge
// pages). The kernel backs a region with a huge page at the first I/O into
// it when it can, and with ordinary pages when it cannot (THP off, memory
// fragmented): nothing else changes.
//
// A region is unmapped by a cleanup once no Buf of it is reachable: a
// buffer whose I/O timed out is kept referenced by that I/O until the
// kernel has finished with it (aio.go), exactly as a heap buffer is, so no
// mapping goes away under a pending I/O. A Device that is not a BufReader
// holds only the bytes of a timed-out read, not the Buf, so the generic
// ReadBuf never gives it a region's buffer (a late write into an unmapped
// region would crash the daemon).
const (
	hugeSize     = 2 << 20
	hugeMinClass = 20 - minClassLog // 1 MiB and larger
)

// hugeOff is set once mapping a region failed: the pool then allocates
// from the heap.
var hugeOff atomic.Bool

// hugeRegion owns one mapping; every Buf cut from it refers to it.
type hugeRegion struct {
	size int // of the mapping (not zero: a cleanup needs an object of its own)
	// mem is the whole mapping and blocks the number of buffers cut from
	// it: the pool gives a region's pages back only all at once
	// (dropPagesLocked), since dropping part of a huge page splits it for
	// good.
	mem    []byte
	blocks int
	gone   int // buffers the pool dropped (leavePool); under the class lock
}

type hugeMapping struct {
	p unsafe.Pointer
	n uintptr
}

// hugeBlocks maps a region for buffers of size bytes (a power of two, at
// least 1 MiB) and returns its blocks: max(hugeSize/size, 1) of them, each
// aligned to its own size. nil when the mapping failed.
func hugeBlocks(size int) ([][]byte, *hugeRegion) {
	total := max(size, hugeSize)
	// Map one huge page more than needed and unmap the unaligned ends.
	raw, err := unix.MmapPtr(-1, 0, nil, uintptr(total+hugeSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		hugeOff.Store(true)
		return nil, nil
	}
	head := (hugeSize - int(uintptr(raw)%hugeSize)) % hugeSize
	base := unsafe.Add(raw, head)
	if head > 0 {
		_ = unix.MunmapPtr(raw, uintptr(head))
	}
	if tail := hugeSize - head; tail > 0 {
		_ = unix.MunmapPtr(unsafe.Add(base, total), uintptr(tail))
	}
	mem := unsafe.Slice((*byte)(base), total)
	_ = unix.Madvise(mem, unix.MADV_HUGEPAGE) // without THP: ordinary pages
	r := &hugeRegion{size: total, mem: mem, blocks: max(total/size, 1)}
	runtime.AddCleanup(r, func(m hugeMapping) { _ = unix.MunmapPtr(m.p, m.n) }, hugeMapping{base, uintptr(total)})
	var out [][]byte
	for off := 0; off < total; off += size {
		out = append(out, mem[off:off+size:off+size])
	}
	return out, r
}
