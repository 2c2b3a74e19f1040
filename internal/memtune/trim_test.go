package memtune

import (
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"
)

// TestParseReadOnlyMappings: only the executable's private read-only
// mappings (text, read-only data) are taken, never its writable data,
// another file or an anonymous mapping.
func TestParseReadOnlyMappings(t *testing.T) {
	const exe = "/usr/sbin/sanlock"
	maps := `00400000-00843000 r-xp 00000000 fd:01 123 /usr/sbin/sanlock
00843000-00ccc000 r--p 00443000 fd:01 123 /usr/sbin/sanlock
00ccc000-00d2d000 rw-p 008cc000 fd:01 123 /usr/sbin/sanlock
00d2d000-02d70000 rw-p 00000000 00:00 0
7f0000000000-7f0000100000 r-xp 00000000 fd:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6
7f0000200000-7f0000201000 r--p 00000000 fd:01 123 /usr/sbin/sanlock (deleted)
7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0 [stack]
`
	p := filepath.Join(t.TempDir(), "maps")
	if err := os.WriteFile(p, []byte(maps), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := parseReadOnlyMappings(f, exe)
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]uintptr{{0x400000, 0x843000}, {0x843000, 0xccc000}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %x, want %x", got, want)
	}
}

// TestTrimBinary: the test binary's own read-only mappings are found, and
// dropping them leaves the process running (its code and tables are mapped
// back as they are used); a second trim within trimInterval does nothing.
func TestTrimBinary(t *testing.T) {
	r, err := exeReadOnlyMappings()
	if err != nil || len(r) == 0 {
		t.Fatalf("exeReadOnlyMappings: %x, %v", r, err)
	}
	b := &binaryTrim{ranges: r}
	now := time.Now()
	b.trim(now)
	b.mu.Lock()
	last := b.last
	b.mu.Unlock()
	if !last.Equal(now) {
		t.Fatalf("last trim %v, want %v", last, now)
	}
	b.trim(now.Add(trimInterval / 2))
	b.mu.Lock()
	last = b.last
	b.mu.Unlock()
	if !last.Equal(now) {
		t.Fatalf("a trim within trimInterval ran (last %v)", last)
	}
	if s := filepath.Base(os.Args[0]); s == "" { // runs code after the trim
		t.Fatal("no program name")
	}
}

// TestTrimSettled: joins that settle drop the mappings once, settleDelay
// after the last of them, whatever the start-up drop's time; a trimmer
// that found no mappings (nil) does nothing.
func TestTrimSettled(t *testing.T) {
	r, err := exeReadOnlyMappings()
	if err != nil || len(r) == 0 {
		t.Fatalf("exeReadOnlyMappings: %x, %v", r, err)
	}
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		b := &binaryTrim{ranges: r, last: start}
		lastTrim := func() time.Time {
			b.mu.Lock()
			defer b.mu.Unlock()
			return b.last
		}
		b.settled()
		time.Sleep(settleDelay / 2)
		b.settled() // a second join settles: the drop waits for it
		time.Sleep(settleDelay/2 + time.Second)
		synctest.Wait()
		if !lastTrim().Equal(start) {
			t.Fatalf("dropped before settleDelay after the last join")
		}
		time.Sleep(settleDelay / 2)
		synctest.Wait()
		if got, want := lastTrim(), start.Add(settleDelay*3/2); !got.Equal(want) {
			t.Fatalf("drop at %v, want %v", got.Sub(start), want.Sub(start))
		}
	})
	var none *binaryTrim
	none.settled()
}
