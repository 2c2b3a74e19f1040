package memtune

import (
	"bufio"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Pages of the binary (docs/performance.md "Binary pages"). Package
// initialisation and start-up touch code, read-only data and function
// tables all over the executable, and the kernel maps whole page-cache
// folios (up to megabytes of the file) around each touch; a running daemon
// uses a small part of that. So once start-up is over the daemon drops its
// mappings of the binary's read-only segments (MADV_DONTNEED): the pages
// stay in the page cache, and what the daemon runs from then on is mapped
// back on its first touch (a minor fault, no I/O). Writable data is never
// touched. Pages locked by mlockall (-l 1, -l 2) refuse MADV_DONTNEED and
// stay mapped. This is done once, not again when the daemon goes idle:
// dropping what the daemon does use would only lower the figure, not the
// memory the process needs.
//
// Joining a lockspace is start-up work of the same kind: the join's code
// and the stack copies of its goroutines touch megabytes of the binary that
// renewals never use again. So the drop is also done once more each time
// joins settle (Tuner.Settled: a joined lockspace renewed twice),
// settleDelay after the last of a burst of joins; the renewal path maps back
// what it uses at its next renewal and keeps it.
//
// A burst of acquires or releases is the same (docs/performance.md "Held
// leases"): the daemon calls Tuner.Settled after every few dozen
// of them, and settleDelay after the last call the drop runs. It also returns
// the heap's free pages to the kernel then (debug.FreeOSMemory: one
// collection, then every free span released): the garbage of a burst of
// acquires leaves the heap at its collection goal, megabytes above what the
// held leases keep, and an idle daemon allocates too little for the
// runtime to collect and shrink it soon.
const (
	trimInterval = 10 * time.Second
	settleDelay  = 5 * time.Second
)

// binaryTrim drops the executable's read-only mappings. startBinaryTrim
// makes the daemon's (Start); a test makes its own.
type binaryTrim struct {
	mu     sync.Mutex
	ranges [][2]uintptr // the executable's read-only mappings
	last   time.Time
	settle *time.Timer // settled's pending drop
}

// startBinaryTrim finds the executable's read-only mappings and drops
// them once (start-up is over). Errors leave it off: nil, whose settled
// does nothing.
func startBinaryTrim() *binaryTrim {
	r, err := exeReadOnlyMappings()
	if err != nil || len(r) == 0 {
		return nil
	}
	b := &binaryTrim{ranges: r}
	b.trim(time.Now())
	return b
}

// settled drops the mappings settleDelay after its last call (joins
// settled); nothing when the start-up drop found no mappings.
func (b *binaryTrim) settled() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ranges == nil {
		return
	}
	if b.settle == nil {
		b.settle = time.AfterFunc(settleDelay, func() {
			// The collection first, its code is mapped back on touch; and
			// outside the lock, so that settled (called by request
			// handlers) never waits for it.
			debug.FreeOSMemory()
			b.mu.Lock()
			defer b.mu.Unlock()
			b.last = time.Now()
			b.dropMappingsLocked()
		})
		return
	}
	b.settle.Reset(settleDelay)
}

// trim drops the mappings unless it did within trimInterval.
func (b *binaryTrim) trim(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.last.IsZero() && now.Sub(b.last) < trimInterval {
		return
	}
	b.last = now
	b.dropMappingsLocked()
}

func (b *binaryTrim) dropMappingsLocked() {
	for _, m := range b.ranges {
		_, _, _ = unix.Syscall(unix.SYS_MADVISE, m[0], m[1]-m[0], unix.MADV_DONTNEED)
	}
}

// exeReadOnlyMappings returns the address ranges of /proc/self/exe's
// read-only, private mappings (text, read-only data) from
// /proc/self/maps.
func exeReadOnlyMappings() ([][2]uintptr, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return nil, err
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseReadOnlyMappings(f, exe)
}

func parseReadOnlyMappings(f *os.File, exe string) ([][2]uintptr, error) {
	var out [][2]uintptr
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fs := strings.Fields(sc.Text())
		if len(fs) != 6 || fs[5] != exe || (fs[1] != "r-xp" && fs[1] != "r--p") {
			continue
		}
		a, b, ok := strings.Cut(fs[0], "-")
		if !ok {
			continue
		}
		lo, err1 := strconv.ParseUint(a, 16, 64)
		hi, err2 := strconv.ParseUint(b, 16, 64)
		if err1 != nil || err2 != nil || hi <= lo {
			continue
		}
		out = append(out, [2]uintptr{uintptr(lo), uintptr(hi)})
	}
	return out, sc.Err()
}
