package newerinterop

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/internal/debtree"
)

// TestTrixie395 sends the same requests to the 3.9.5 daemon of the
// trixie tree (raw bytes: its libsanlock has none of the 5.1.1 calls):
// which of the new flags 3.9.5 already knows, and what it does with
// commands 41-44.
func TestTrixie395(t *testing.T) {
	t.Parallel()
	tr := debtree.Get(t, "trixie")
	if tr.Version != "3.9.5" {
		t.Fatalf("trixie tree has sanlock %s, want 3.9.5", tr.Version)
	}
	files := leaseFiles(t, "ls", "res", "ls2")
	lsPath, resPath, ls2Path := files[0], files[1], files[2]
	d := tr.StartDaemon(t, "", "-e", "host395")
	s := d.SocketPath()
	const wait = 10 * time.Second

	wantResult(t, "WRITE_LOCKSPACE", exchange(t, s, request(cmdWriteLockspace, 0, 0, 0, lockspace("ls1", 0, 0, lsPath, 0)), wait), 0)
	wantResult(t, "WRITE_RESOURCE", exchange(t, s, request(cmdWriteResource, 0, 0, 0, resource("ls1", "r1", 0, resPath, 0)), wait), 0)
	wantResult(t, "WRITE_LOCKSPACE ls2", exchange(t, s, request(cmdWriteLockspace, 0, 0, 0, lockspace("ls2", 0, 0, ls2Path, 0)), wait), 0)

	start := time.Now()
	wantResult(t, "ADD_LOCKSPACE 0x2", exchange(t, s, request(cmdAddLockspace, 0x2, 0, 0, lockspace("ls1", 1, 0, lsPath, 0)), 2*time.Minute), 0)
	t.Logf("ADD_LOCKSPACE with 0x2 (NODELAY in 5.1.1) took %v", time.Since(start).Round(100*time.Millisecond))

	results := map[string]reply{}
	note := func(name string, r reply) { results[name] = r }

	note("get_hosts 0x1", exchange(t, s, request(cmdGetHosts, 0x1, 0, 0, lockspace("ls1", 0, 0, "", 0)), wait))
	note("set_config 0x10", exchange(t, s, request(cmdSetConfig, 0, 0x10, 10, lockspace("ls1", 0, 0, "", 0)), wait))
	note("write_lockspace 0x1 flags 0", exchange(t, s, request(cmdWriteLockspace, 0x1, 0, 0, lockspace("ls2", 0, 0, ls2Path, 0)), wait))

	// FOR_CLIENT_ID: a registered client of this test process.
	c := register(t, s)
	time.Sleep(100 * time.Millisecond)
	ci := clientIndex(t, d, os.Getpid())
	note("acquire FOR_CLIENT_ID", exchange(t, s, request(cmdAcquire, 0x10, 1, ci, resource("ls1", "r1", 0, resPath, 0), make([]byte, optionsSize)), wait))
	note("inquire FOR_CLIENT_ID", exchange(t, s, request(cmdInquire, 0x10, 0, ci), wait))
	note("release FOR_CLIENT_ID", exchange(t, s, request(cmdRelease, 0x10, 1, ci, resource("ls1", "r1", 0, "", 0)), wait))
	note("release 0x8 nothing held", exchangeOn(t, c, request(cmdRelease, 0x8, 1, 0xffffffff, resource("ls1", "r1", 0, "", 0)), wait))

	// 42-44 (and 41 last: it is answered by nobody, and its payload may
	// be read as headers).
	note("42", exchange(t, s, request(cmdReadLSHost, 0, 0, 0, lockspace("", 1, 0, lsPath, 0)), 3*time.Second))
	note("43", exchange(t, s, request(cmdInitLSHost, 0x2, 0, 10, lockspace("ls2", 5, 0, ls2Path, 0), leaderRec(5, 3, "hostfive", 1234)), 3*time.Second))
	note("44", exchange(t, s, request(cmdSetHost, 0, 1, 0, lockspace("ls1", 1, 0, lsPath, 0), hostRec(2, 1, 0, 0, 0)), 3*time.Second))
	note("41", exchange(t, s, request(cmdAcquire2, 0, 1, 0xffffffff, resource("ls1", "r1", 0, resPath, 0), make([]byte, optionsSize)), 3*time.Second))
	v := exchange(t, s, request(cmdVersion, 0, 0, 0), wait)
	note("version after", v)

	// What 3.9.5 answered: NODELAY, LOCAL, IO_TIMEOUT and LS_FLAGS are
	// not known yet (the join took the full 21 s; GET_HOSTS answers as
	// without the flag: -11 before the first renewal read, the hosts
	// after it, so either is accepted; LS_FLAGS with flags
	// 0 formats the area), FOR_CLIENT_ID is, and 41-44 get no reply.
	want := []struct {
		name    string
		result  int32
		noReply bool
	}{
		{"get_hosts 0x1", -11, false},
		{"set_config 0x10", -22, false},
		{"write_lockspace 0x1 flags 0", 0, false},
		{"acquire FOR_CLIENT_ID", 0, false},
		{"inquire FOR_CLIENT_ID", 0, false},
		{"release FOR_CLIENT_ID", 0, false},
		{"release 0x8 nothing held", -1, false},
		{"42", 0, true},
		{"43", 0, true},
		{"44", 0, true},
		{"41", 0, true},
		{"version after", 0, false},
	}
	var tab strings.Builder
	for _, w := range want {
		r := results[w.name]
		tab.WriteString(w.name + ": " + r.String() + "\n")
		if w.name == "get_hosts 0x1" && r.result() == 0 && !r.NoReply && !r.Closed {
			continue // the hosts, once the first renewal has read them
		}
		if r.NoReply != w.noReply || r.Closed || (!w.noReply && r.result() != w.result) {
			t.Errorf("%s: 3.9.5 answered %s, want %d (no reply: %v)", w.name, r, w.result, w.noReply)
		}
	}
	if r := results["inquire FOR_CLIENT_ID"]; r.Data2 != 1 || !strings.HasPrefix(cstr(r.Body), "ls1:r1:"+resPath+":0:") {
		t.Errorf("INQUIRE FOR_CLIENT_ID: %s %q", r, cstr(r.Body))
	}
	if v.Data2 != 0x03090500 {
		t.Errorf("VERSION: %#x", v.Data2)
	}
	t.Logf("3.9.5 answered:\n%s", tab.String())
}
