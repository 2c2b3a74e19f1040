package diskio

import (
	"context"
	"math/bits"
	"runtime/debug"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Buf is an aligned I/O buffer from the package's pool: its start is
// aligned to alignBytes (4096, enough for O_DIRECT on every sector size) and
// its capacity is a power of two from 4 KiB to 16 MiB. Get one with GetBuf,
// use Bytes, give it back with Release once nothing refers to its bytes any
// more.
//
// A buffer whose I/O timed out is never released: the device that owns the
// I/O drops it, and the garbage collector frees it once (if ever) the kernel
// has finished with it. Nothing else can ever see its late contents.
type Buf struct {
	b     []byte // the whole aligned block (len = class size)
	n     int
	class int8 // -1: not pooled (larger than the largest class)
	cold  bool // in the free list, its pages given back (dropPagesLocked)
	// region is the huge-page mapping b lies in (hugebuf.go), nil for a
	// heap block: it keeps the mapping alive.
	region *hugeRegion
	// turn: the background reads' turns b holds one of (getBufFor) until
	// it is released or abandoned; nil: none.
	turn *readTurns
}

const (
	alignBytes   = 4096
	minClassLog  = 12 // 4 KiB
	maxClassLog  = 24 // 16 MiB
	numClasses   = maxClassLog - minClassLog + 1
	poolKeepSize = 8 << 20 // bytes kept idle per class (at least 2 buffers)
)

type bufClass struct {
	mu   sync.Mutex
	free []*Buf
	keep int
	// low is the fewest free buffers seen since the last trim: that many
	// sat unused for the whole period. A Release after trimAt drops all
	// but one of them, so the pool shrinks back to what the load of the
	// last period needed plus one (an idle daemon renewing its lockspaces
	// one at a time keeps two 1 MiB buffers, not the eight a burst of
	// acquires left behind).
	low    int
	trimAt time.Time
	// lastRelease is the time of the class's last Release (coldGap).
	lastRelease time.Time
}

// Idle pages. A large class in sparse use (the 1 MiB buffers of a
// lockspace at a long io_timeout, renewing once a minute, or of the
// acquire path after a burst of acquires ended) keeps its free buffers'
// pages in the pool: mebibytes of RSS that do nothing (docs/performance.md
// "Buffer pool"). So when the releases of a large class come further apart
// than coldGap, the class is in sparse use, and Release gives the pages of
// its free buffers back to the system (MADV_DONTNEED), whole huge-page
// regions only (dropPagesLocked): the buffers stay pooled, and the next I/O into one faults
// in fresh zeroed pages (contents are undefined anyway). A class in steady
// use never goes cold and keeps its pages: acquires, and lockspaces at a
// short io_timeout, which renew every 2 s and would otherwise fault in
// (zero) a fresh mebibyte per renewal; hence a gap of 45 s, more than the
// renewal period up to io_timeout 20 (docs/performance.md "Pool page
// rules": with 5 s, lockspaces at the default io_timeout 10, which
// renew every 20.5 s, found their buffers dropped at every renewal,
// faulted in a zeroed mebibyte of small pages per renewal and read its
// records through a TLB miss per page).
const (
	coldGap      = 45 * time.Second
	coldMinClass = 18 - minClassLog // 256 KiB and larger
)

// poolTrimPeriod is how long a pooled buffer may sit unused before a
// Release drops it.
const poolTrimPeriod = 10 * time.Second

var bufPool [numClasses]bufClass

func init() {
	for i := range bufPool {
		size := 1 << (minClassLog + i)
		bufPool[i].keep = min(max(poolKeepSize/size, 2), 64)
	}
}

// classOf returns the size class index for n bytes, or -1 above the
// largest class.
func classOf(n int) int {
	if n <= 1<<minClassLog {
		return 0
	}
	c := bits.Len(uint(n-1)) - minClassLog
	if c >= numClasses {
		return -1
	}
	return c
}

// alignedBlock allocates size bytes starting on an alignBytes boundary.
func alignedBlock(size int) []byte {
	raw := make([]byte, size+alignBytes)
	a := int(uintptr(unsafe.Pointer(unsafe.SliceData(raw))) & (alignBytes - 1))
	skip := 0
	if a != 0 {
		skip = alignBytes - a
	}
	return raw[skip : skip+size : skip+size]
}

// GetBuf returns an aligned buffer of n bytes (n > 0). Its contents are
// undefined: callers fill it completely (a read) or clear what they need.
func GetBuf(n int) *Buf {
	c := classOf(n)
	if c < 0 {
		return &Buf{b: alignedBlock(roundUp(n, alignBytes)), n: n, class: -1}
	}
	p := &bufPool[c]
	p.mu.Lock()
	if k := len(p.free); k > 0 {
		b := p.free[k-1]
		p.free[k-1] = nil
		p.free = p.free[:k-1]
		p.low = min(p.low, k-1)
		p.mu.Unlock()
		b.n, b.cold = n, false
		return b
	}
	p.mu.Unlock()
	size := 1 << (minClassLog + c)
	if c >= hugeMinClass && !hugeOff.Load() {
		if blocks, r := hugeBlocks(size); blocks != nil {
			// The other blocks of the region go to the free list.
			p.mu.Lock()
			for _, blk := range blocks[1:] {
				p.free = append(p.free, &Buf{b: blk, class: int8(c), region: r})
			}
			p.mu.Unlock()
			return &Buf{b: blocks[0], n: n, class: int8(c), region: r}
		}
	}
	return &Buf{b: alignedBlock(size), n: n, class: int8(c)}
}

// Bytes returns the n bytes asked for.
func (b *Buf) Bytes() []byte { return b.b[:b.n] }

// Release returns b to the pool. b must not be used afterwards. A nil b is
// ignored.
func (b *Buf) Release() {
	if b == nil {
		return
	}
	b.endTurn()
	if b.class < 0 {
		return
	}
	now := time.Now()
	p := &bufPool[b.class]
	size := int64(len(b.b))
	p.mu.Lock()
	// The class's first release is not sparse use: it has no gap to
	// measure (and a drop then would split the huge page just faulted in).
	sparse := int(b.class) >= coldMinClass && !p.lastRelease.IsZero() && now.Sub(p.lastRelease) > coldGap
	p.lastRelease = now
	dropped := int64(0)
	if len(p.free) < p.keep {
		p.free = append(p.free, b)
	} else {
		dropped = size
		b.leavePool()
	}
	if now.After(p.trimAt) {
		dropped += int64(p.trimLocked(now)) * size
	}
	if sparse {
		p.dropPagesLocked()
	}
	p.mu.Unlock()
	if dropped > 0 {
		noteDropped(dropped, now)
	}
}

// Background reads take turns. Every renewal reads its lockspace's whole
// area (1 MiB, 8 MiB with 4 KiB sectors), and the lockspaces of a daemon
// joined together renew together: a hundred at io_timeout 10 fall into the
// four phases of a second (delta/renewloop.go), about 25 renewals at one
// instant. If each took a buffer of its own, every renewal burst would map
// some twenty fresh huge pages beyond the few the pool keeps, the kernel
// would zero each one (two thirds of an idle daemon's CPU time,
// docs/performance.md "Background read turns"), and the unmapped ones
// would stay resident until the next collection. So a background read of
// the large classes (Background: renewals only) first takes one of
// bgReadTurns turns, waiting for one up to bgReadWait, and gives it back
// with its buffer: a burst then cycles through two or three pooled buffers,
// a read of a few milliseconds each. The wait is bounded, so storage that
// hangs costs the other lockspaces' renewals at most bgReadWait each (and
// a fresh buffer), never a renewal: a read that finds no turn in time goes
// on without one.
const (
	bgReadTurns = 2
	bgReadWait  = 100 * time.Millisecond
)

// readTurns are the turns of background reads: a token in ch is a turn
// taken, and a read waits for one up to wait.
type readTurns struct {
	ch   chan struct{}
	wait time.Duration
}

func newReadTurns(n int, wait time.Duration) *readTurns {
	return &readTurns{ch: make(chan struct{}, n), wait: wait}
}

// bgTurns are the process's turns, shared by every device.
var bgTurns = newReadTurns(bgReadTurns, bgReadWait)

// getBufFor is GetBuf for a read under ctx: a background read of the large
// classes takes a turn first (see bgReadTurns).
func getBufFor(ctx context.Context, n int) *Buf {
	return bgTurns.getBuf(ctx, n)
}

// getBuf is GetBuf for a read under ctx that takes one of t's turns first
// when it is a background read of the large classes. Its wait is also at
// most a twentieth of the time left before ctx's deadline, which bounds the
// read.
func (t *readTurns) getBuf(ctx context.Context, n int) *Buf {
	if classOf(n) < hugeMinClass || !isBackground(ctx) {
		return GetBuf(n)
	}
	var turn *readTurns
	select {
	case t.ch <- struct{}{}:
		turn = t
	default:
		wait := t.wait
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl)/20)
		}
		if wait > 0 {
			tm := time.NewTimer(wait)
			select {
			case t.ch <- struct{}{}:
				turn = t
			case <-tm.C:
			case <-ctx.Done():
			}
			tm.Stop()
		}
	}
	b := GetBuf(n)
	b.turn = turn
	return b
}

// endTurn gives back b's background-read turn, if it holds one. Release
// calls it; so does a device that abandons b after a timed-out read.
func (b *Buf) endTurn() {
	if t := b.turn; t != nil {
		b.turn = nil
		<-t.ch
	}
}

// leavePool records that the pool let go of b for good (trimmed, or not
// kept): nothing uses it any more, so its region may give its pages back
// without it (dropPagesLocked). Called under b's class lock, which guards
// the regions of the class.
func (b *Buf) leavePool() {
	if b.region != nil {
		b.region.gone++
	}
}

// trimLocked drops the buffers that were not needed since the last trim
// (the garbage collector frees them) and starts a new period. It returns
// how many it dropped.
func (p *bufClass) trimLocked(now time.Time) int {
	n := len(p.free)
	// One of the unused buffers stays: the load of a period varies a
	// little, and a buffer dropped only to be allocated again is churn.
	drop := max(min(p.low, n)-1, 0)
	for i := n - drop; i < n; i++ {
		p.free[i].leavePool()
		p.free[i] = nil
	}
	p.free = p.free[:n-drop]
	if cap(p.free) > 2*p.keep { // keep the slice itself small too
		p.free = append([]*Buf(nil), p.free...)
	}
	p.low = len(p.free)
	p.trimAt = now.Add(poolTrimPeriod)
	return drop
}

// dropPagesLocked gives the pages of the free buffers back to the system.
// It runs under the class's lock, so no GetBuf can hand a buffer out (and
// start an I/O into it) while its pages are being dropped; it only runs in
// a class in sparse use, where nobody waits for the lock. Every buffer's
// block is whole pages (aligned start, size a multiple of 4096) inside its
// own allocation, which the garbage collector never reads (no pointers).
//
// A huge-page region's pages go back only once every buffer cut from it is
// in the free list, in one call over the whole mapping: dropping one half
// of a huge page splits it into small pages, and the half left, and every
// later fault in that range, stays small (no huge page for a mapping again
// until khugepaged, minutes later, collapses it). Reads into small pages
// cost more (hugebuf.go), a 1 MiB area read about a fifth more here, so a
// region one of whose buffers is out keeps its pages.
func (p *bufClass) dropPagesLocked() {
	var regions map[*hugeRegion]int // free buffers of each region
	for _, f := range p.free {
		switch {
		case f.region != nil:
			if regions == nil {
				regions = map[*hugeRegion]int{}
			}
			regions[f.region]++
		case f.cold:
		case unix.Madvise(f.b, unix.MADV_DONTNEED) == nil:
			f.cold = true
		}
	}
	for r, free := range regions {
		// Buffers the pool let go of (r.gone) are unused for good; one
		// out, or abandoned with a timed-out read, keeps the region.
		if free+r.gone < r.blocks || unix.Madvise(r.mem, unix.MADV_DONTNEED) != nil {
			delete(regions, r)
		}
	}
	for _, f := range p.free {
		if _, ok := regions[f.region]; ok && f.region != nil {
			f.cold = true
		}
	}
}

// Returning dropped buffers to the system. The garbage collector frees a
// dropped buffer only at its next cycle, and the runtime keeps freed pages
// up to about twice the live heap of that cycle; in an idle daemon, whose
// few allocations start a cycle every two minutes at most, the megabytes a
// burst of acquires or joins left behind would stay resident for good.
// So once enough has been dropped, and at most once per period, the whole
// heap is collected and returned (debug.FreeOSMemory, a few milliseconds
// for this daemon's small heap) on a goroutine of its own.
const freeOSThreshold = 4 << 20

var freeOS struct {
	mu      sync.Mutex
	dropped int64
	last    time.Time
	running bool
}

func noteDropped(n int64, now time.Time) {
	freeOS.mu.Lock()
	defer freeOS.mu.Unlock()
	freeOS.dropped += n
	if freeOS.running || freeOS.dropped < freeOSThreshold || now.Sub(freeOS.last) < poolTrimPeriod {
		return
	}
	freeOS.dropped, freeOS.last, freeOS.running = 0, now, true
	go func() {
		debug.FreeOSMemory()
		freeOS.mu.Lock()
		freeOS.running = false
		freeOS.mu.Unlock()
	}()
}
