package newerinterop

import (
	"strings"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/diskio"
	"github.com/gosanlock/gosanlock/internal/debtree"
)

// slotAt reads and decodes the delta lease of hostID in the lockspace file.
func slotAt(t *testing.T, path string, hostID uint64) diskfmt.Leader {
	t.Helper()
	dev, err := diskio.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	b := make([]byte, 512)
	if err := dev.ReadAt(t.Context(), b, int64(hostID-1)*512); err != nil {
		t.Fatal(err)
	}
	l, err := diskfmt.DecodeLeader(b)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestNewer511SetHost pins what 5.1.1 does with set_host DEAD_EXT in a
// NO_TIMEOUT lockspace (slots written by `init_host -N 1`), daemons A
// (host 1) and B (host 2), io_timeout 1 (docs/protocol.md "Commands of
// 3.9.5 and 5.1.1", docs/delta.md "set_host DEAD_EXT"): the -22/-2
// answers; generation 0 keeps the lease's; a wrong generation is
// answered 0 and written (newer.md says -280); the live target fails its
// renewal with -263 and leaves; A shows it DEAD with host flags 0x15; B
// rejoins over the mark with the next generation, the flag cleared and
// unused1 kept. About 30 s.
func TestNewer511SetHost(t *testing.T) {
	t.Parallel()
	tr := debtree.Get(t, "sid")
	ls := leaseFiles(t, "ls")[0]
	for _, args := range [][]string{
		{"direct", "init", "-s", "LS:0:" + ls + ":0"},
		{"direct", "init_host", "-s", "LS:1:" + ls + ":0", "-N", "1", "-C", "0", "-g", "0", "-t", "0"},
		{"direct", "init_host", "-s", "LS:2:" + ls + ":0", "-N", "1", "-C", "0", "-g", "0", "-t", "0"},
		{"direct", "init_host", "-s", "LS:4:" + ls + ":0", "-N", "1", "-C", "0", "-g", "3", "-t", "0"},
	} {
		if out, err := tr.Command(nil, append([]string{"sanlock"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v %s", args, err, out)
		}
	}
	a := tr.StartDaemon(t, "", "-e", "hostA", "-o", "1")
	b := tr.StartDaemon(t, "", "-e", "hostB", "-o", "1")
	done := make(chan string, 2)
	for i, d := range []*debtree.Daemon{a, b} {
		go func() {
			out, err := d.Client(t, "client", "add_lockspace", "-s", "LS:"+string(rune('1'+i))+":"+ls+":0", "-N", "1")
			if err != nil || !strings.Contains(out, "add_lockspace done 0") {
				done <- out
				return
			}
			done <- ""
		}()
	}
	for range 2 {
		if out := <-done; out != "" {
			t.Fatalf("add_lockspace: %s", out)
		}
	}
	out, _ := a.Client(t, "client", "gets")
	if !strings.Contains(out, "NO_TIMEOUT") {
		t.Errorf("gets does not show NO_TIMEOUT: %s", out)
	}
	setHost := func(lsHost, cmd, target, gen string) int {
		return tr.CallOnce(t, a.RunDir, "set_host", "LS", ls, "0", lsHost, cmd, "0", "0", target, gen, "0", "0", "0").RV
	}
	for _, c := range []struct {
		name                  string
		lsHost, cmd, tgt, gen string
		want                  int
	}{
		{"subcommand 2", "1", "2", "2", "1", -22},
		{"target host_id 0", "1", "1", "0", "1", -22},
		{"lockspace host_id 0", "0", "1", "2", "1", -22},
		{"lockspace host_id not ours", "3", "1", "2", "1", -22},
	} {
		if rv := setHost(c.lsHost, c.cmd, c.tgt, c.gen); rv != c.want {
			t.Errorf("set_host %s: %d, want %d", c.name, rv, c.want)
		}
	}
	if rv := tr.CallOnce(t, a.RunDir, "set_host", "other", ls, "0", "1", "1", "0", "0", "2", "1", "0", "0", "0").RV; rv != -2 {
		t.Errorf("set_host in a lockspace not joined: %d, want -2", rv)
	}
	if s := slotAt(t, ls, 2); s.DeadExt() {
		t.Fatalf("slot 2 marked by a refused set_host: %+v", s)
	}

	// Generation 0 keeps the lease's (an unused slot, generation 3).
	if rv := setHost("1", "1", "4", "0"); rv != 0 {
		t.Fatalf("set_host slot 4 generation 0: %d", rv)
	}
	if s := slotAt(t, ls, 4); s.OwnerGeneration != 3 || !s.DeadExt() || !s.NoTimeout() || s.Unused1 != diskfmt.DeadExtMark {
		t.Errorf("slot 4 after set_host generation 0: gen %d flags %#x unused1 %#x", s.OwnerGeneration, s.Flags, s.Unused1)
	}

	// A wrong generation on the live host B: 0, written.
	if rv := setHost("1", "1", "2", "5"); rv != 0 {
		t.Fatalf("set_host host 2 generation 5 (its lease has 1): %d, 5.1.1 answered 0", rv)
	}
	if s := slotAt(t, ls, 2); s.OwnerGeneration != 5 || !s.DeadExt() || s.Unused1 != diskfmt.DeadExtMark {
		t.Errorf("slot 2 after set_host generation 5: gen %d flags %#x unused1 %#x", s.OwnerGeneration, s.Flags, s.Unused1)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(b.Log(), "renewal error -263") {
		if time.Now().After(deadline) {
			t.Fatalf("B did not fail its renewal with -263:\n%s", b.Log())
		}
		time.Sleep(500 * time.Millisecond)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		out, _ := a.Client(t, "client", "host_status", "-s", "LS", "-D")
		if strings.Contains(out, "host_flags=0x15") && strings.Contains(out, "dead_ext=1") &&
			strings.Contains(out, "wrote_dead_ext_gen=5") && strings.Contains(out, "host_state=DEAD") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A's host_status never showed host 2 DEAD_EXT:\n%s", out)
		}
		time.Sleep(500 * time.Millisecond)
	}

	// B comes back over the mark.
	b2 := tr.StartDaemon(t, "", "-e", "hostB", "-o", "1")
	if out, err := b2.Client(t, "client", "add_lockspace", "-s", "LS:2:"+ls+":0", "-N", "1"); err != nil {
		t.Fatalf("B rejoin: %v %s", err, out)
	}
	if s := slotAt(t, ls, 2); s.OwnerGeneration != 6 || s.DeadExt() || !s.NoTimeout() || s.Unused1 != diskfmt.DeadExtMark {
		t.Errorf("slot 2 after the rejoin: gen %d flags %#x unused1 %#x (5.1.1: 6, NO_TIMEOUT only, mark kept)",
			s.OwnerGeneration, s.Flags, s.Unused1)
	}
	// Marked by host 2 (generation 6) instead of host 1 (generation 1):
	// unused1 carries the writer's host_id and generation.
	if rv := tr.CallOnce(t, b2.RunDir, "set_host", "LS", ls, "0", "2", "1", "0", "0", "5", "0", "0", "0", "0").RV; rv != 0 {
		t.Fatalf("set_host slot 5 from host 2: %d", rv)
	}
	if s := slotAt(t, ls, 5); !s.DeadExt() || s.Unused1 != diskfmt.DeadExtFrom(2, 6) {
		t.Errorf("slot 5 marked by host 2: flags %#x unused1 %#x", s.Flags, s.Unused1)
	}
}
