package newerinterop

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/internal/debtree"
)

// leaseFiles makes the lockspace and resource files of a test under
// /var/tmp (the same path inside the trees), removed at cleanup.
func leaseFiles(t *testing.T, names ...string) []string {
	t.Helper()
	// A name of fixed length: the paths show in replies that the tests
	// compare by length between two daemons.
	var dir string
	for i := 0; dir == ""; i++ {
		d := fmt.Sprintf("/var/tmp/newer%08x", rand.Uint32())
		switch err := os.Mkdir(d, 0o755); {
		case err == nil:
			dir = d
		case !os.IsExist(err) || i > 100:
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var paths []string
	for _, n := range names {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, 8<<20); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// clientIndex is the ci of the registered client with pid, from the
// CLIENT records of STATUS.
func clientIndex(t *testing.T, d *debtree.Daemon, pid int) uint32 {
	t.Helper()
	return clientIndexIn(t, d.HostRunDir(), pid)
}

// clientIndexIn is clientIndex of the daemon whose run directory is dir.
// REGISTER has no reply: the record is waited for (up to 5 s).
func clientIndexIn(t *testing.T, dir string, pid int) uint32 {
	t.Helper()
	cl, err := client.Dial(dir)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		recs, err := cl.Status(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			f := map[string]string{}
			for _, w := range strings.Fields(r.Text) {
				k, v, _ := strings.Cut(w, "=")
				f[k] = v
			}
			if f["pid"] == strconv.Itoa(pid) {
				ci, err := strconv.ParseUint(f["ci"], 10, 32)
				if err != nil {
					t.Fatalf("CLIENT record %q", r.Text)
				}
				return uint32(ci)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no CLIENT record with pid %d", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitLive waits (up to 90 s) until the daemon on sock lists hostID as
// LIVE in ls1.
func waitLive(t *testing.T, sock string, hostID uint64) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		r := exchange(t, sock, request(cmdGetHosts, 0, 0, 0, lockspace("ls1", hostID, 0, "", 0)), 10*time.Second)
		if r.result() == 0 && len(r.Body) >= hostSize {
			if h := parseHost(r.Body); h.HostID == hostID && h.Flags&0xf == 0x3 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("host %d not LIVE after 90 s: %s", hostID, r)
		}
		time.Sleep(2 * time.Second)
	}
}

func wantResult(t *testing.T, what string, r reply, want int32) {
	t.Helper()
	if r.NoReply || r.Closed || r.result() != want {
		t.Fatalf("%s: %s, want result %d", what, r, want)
	}
}

func wantRV(t *testing.T, r debtree.Result, want int) {
	t.Helper()
	if r.RV != want {
		t.Fatalf("driver: %s, want rv=%d", r.Line, want)
	}
}

// TestNewer511 drives the 5.1.1 daemon with each new command and flag,
// from Go (raw bytes, reply bytes checked) and through libsanlock 5.1.1
// (the C driver), on two hosts: daemon A (host_id 1) and daemon B
// (host_id 2) of the sid tree sharing one lockspace under /var/tmp. The
// wanted values are what 5.1.1 answered (docs/protocol.md "Commands of
// 3.9.5 and 5.1.1"); they run in this order because each step builds on
// the last (B is made to leave the lockspace at the end).
func TestNewer511(t *testing.T) {
	t.Parallel()
	tr := debtree.Get(t, "sid")
	if tr.Version != "5.1.1" {
		t.Fatalf("sid tree has sanlock %s, want 5.1.1", tr.Version)
	}
	files := leaseFiles(t, "ls", "res", "ls2")
	lsPath, resPath, ls2Path := files[0], files[1], files[2]
	a := tr.StartDaemon(t, "", "-e", "hostA")
	b := tr.StartDaemon(t, "", "-e", "hostB")
	sa, sb := a.SocketPath(), b.SocketPath()
	const wait = 10 * time.Second

	// Set up: the lockspace and the resource, from Go.
	wantResult(t, "WRITE_LOCKSPACE", exchange(t, sa, request(cmdWriteLockspace, 0, 0, 0, lockspace("ls1", 0, 0, lsPath, 0)), wait), 0)
	wantResult(t, "WRITE_RESOURCE", exchange(t, sa, request(cmdWriteResource, 0, 0, 0, resource("ls1", "r1", 0, resPath, 0)), wait), 0)

	t.Run("add_lockspace NODELAY", func(t *testing.T) {
		start := time.Now()
		wantResult(t, "ADD_LOCKSPACE NODELAY on A", exchange(t, sa, request(cmdAddLockspace, 0x2, 0, 0, lockspace("ls1", 1, 0, lsPath, 0)), time.Minute), 0)
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("NODELAY join took %v (5.1.1 took about 1 s)", d)
		}
		// B joins through libsanlock.
		wantRV(t, tr.CallOnce(t, b.RunDir, "add_lockspace", "ls1", lsPath, "0", "2", "0x2", "0"), 0)
	})

	t.Run("get_hosts LOCAL", func(t *testing.T) {
		r := exchange(t, sa, request(cmdGetHosts, 0x1, 0, 0, lockspace("ls1", 2, 0, "", 0)), wait)
		wantResult(t, "GET_HOSTS LOCAL", r, 0)
		if r.Length != 64 || r.Data2 != 1 || len(r.Body) != hostSize {
			t.Fatalf("GET_HOSTS LOCAL: %s, want length 64, data2 1", r)
		}
		h := parseHost(r.Body)
		// Our own entry whatever host_id was asked; before the first
		// renewal timestamp 0, io_timeout 0 and flags 0x15, after it
		// LIVE (0x3) with the timestamp and io_timeout 10.
		if h.HostID != 1 || h.Generation == 0 {
			t.Fatalf("GET_HOSTS LOCAL answered %+v, want host 1", h)
		}
		if !(h.Timestamp == 0 && h.IOTimeout == 0 && h.Flags == 0x15) && !(h.Timestamp != 0 && h.IOTimeout == 10 && h.Flags == 0x3) {
			t.Errorf("GET_HOSTS LOCAL answered %+v", h)
		}
		r2 := tr.CallOnce(t, a.RunDir, "get_hosts", "ls1", "0", "1")
		wantRV(t, r2, 0)
		if r2.Field("count") != 1 || r2.Field("h0_host_id") != 1 {
			t.Fatalf("driver: %s", r2.Line)
		}
	})

	t.Run("read_lockspace_host", func(t *testing.T) {
		r := exchange(t, sa, request(cmdReadLSHost, 0, 0, 0, lockspace("", 2, 0, lsPath, 0)), wait)
		wantResult(t, "READ_LOCKSPACE_HOST", r, 0)
		if r.Length != 32+lockspaceSize+hostSize || r.Data2 != 10 || len(r.Body) != lockspaceSize+hostSize {
			t.Fatalf("READ_LOCKSPACE_HOST: %s, want length 1168, data2 10 (io_timeout)", r)
		}
		ls := r.Body[:lockspaceSize]
		if cstr(ls[:nameLen]) != "ls1" || le.Uint64(ls[48:]) != 2 || le.Uint32(ls[56:]) != 0x110 {
			t.Errorf("READ_LOCKSPACE_HOST lockspace: name %q host_id %d flags %#x, want ls1 2 0x110",
				cstr(ls[:nameLen]), le.Uint64(ls[48:]), le.Uint32(ls[56:]))
		}
		h := parseHost(r.Body[lockspaceSize:])
		if h.HostID != 2 || h.Generation != 1 || h.Timestamp == 0 || h.IOTimeout != 10 || h.Flags != 0 {
			t.Errorf("READ_LOCKSPACE_HOST host %+v, want host 2 generation 1, a timestamp, io 10, flags 0", h)
		}
		r2 := tr.CallOnce(t, a.RunDir, "read_lockspace_host", "-", lsPath, "0", "2", "0")
		wantRV(t, r2, 0)
		if r2.Fields["ls_name"] != "ls1" || r2.Field("h_generation") != 1 || r2.Field("io_timeout") != 10 {
			t.Errorf("driver: %s", r2.Line)
		}
		// Another name than the lease's, and a place with no lease.
		r = exchange(t, sa, request(cmdReadLSHost, 0, 0, 0, lockspace("other", 2, 0, lsPath, 0)), wait)
		t.Logf("READ_LOCKSPACE_HOST with another name: %s", r)
		r = exchange(t, sa, request(cmdReadLSHost, 0, 0, 0, lockspace("", 1, 0, resPath, 4<<20)), wait)
		t.Logf("READ_LOCKSPACE_HOST where there is no lease: %s", r)
	})

	t.Run("init_lockspace_host", func(t *testing.T) {
		wantResult(t, "WRITE_LOCKSPACE ls2", exchange(t, sa, request(cmdWriteLockspace, 0, 0, 0, lockspace("ls2", 0, 0, ls2Path, 0)), wait), 0)
		// NO_CAW, io_timeout 10: host 5, generation 3, timestamp 1234.
		r := exchange(t, sa, request(cmdInitLSHost, 0x2, 0, 10, lockspace("ls2", 5, 0, ls2Path, 0), leaderRec(5, 3, "hostfive", 1234)), wait)
		wantResult(t, "INIT_LOCKSPACE_HOST", r, 0)
		if r.Length != 32 {
			t.Errorf("INIT_LOCKSPACE_HOST: %s, want a plain result", r)
		}
		r = exchange(t, sa, request(cmdReadLSHost, 0, 0, 0, lockspace("ls2", 5, 0, ls2Path, 0)), wait)
		wantResult(t, "READ_LOCKSPACE_HOST 5", r, 0)
		if h := parseHost(r.Body[lockspaceSize:]); h != (host{5, 3, 1234, 10, 0}) {
			t.Errorf("host 5 after INIT_LOCKSPACE_HOST: %+v", h)
		}
		if f := le.Uint32(r.Body[56:]); f != 0x110 {
			t.Errorf("lockspace flags after INIT_LOCKSPACE_HOST NO_CAW: %#x, want 0x110", f)
		}
		// The same through libsanlock, with neither CAW flag: the lease
		// is marked CAW (0x8) even on a file.
		wantRV(t, tr.CallOnce(t, a.RunDir, "init_lockspace_host", "ls2", ls2Path, "0", "6", "0", "hostsix", "4", "99", "0", "0"), 0)
		r2 := tr.CallOnce(t, a.RunDir, "read_lockspace_host", "ls2", ls2Path, "0", "6", "0")
		wantRV(t, r2, 0)
		if r2.Field("h_generation") != 4 || r2.Field("h_timestamp") != 99 || r2.Field("h_io_timeout") != 10 || r2.Field("ls_flags") != 0x118 {
			t.Errorf("driver: %s", r2.Line)
		}
	})

	t.Run("write_lockspace LS_FLAGS", func(t *testing.T) {
		// Without the ALIGN and SECTOR bits: -22.
		wantResult(t, "WRITE_LOCKSPACE LS_FLAGS 0", exchange(t, sa, request(cmdWriteLockspace, 0x1, 0, 0, lockspace("ls2", 0, 0, ls2Path, 0)), wait), -22)
		wantResult(t, "WRITE_LOCKSPACE LS_FLAGS 0x114", exchange(t, sa, request(cmdWriteLockspace, 0x1, 0, 0, lockspace("ls2", 0, 0x114, ls2Path, 0)), wait), 0)
		r := exchange(t, sa, request(cmdReadLockspace, 0, 0, 0, lockspace("", 1, 0, ls2Path, 0)), wait)
		wantResult(t, "READ_LOCKSPACE", r, 0)
		if f := le.Uint32(r.Body[56:]); f != 0x114 {
			t.Errorf("flags after LS_FLAGS: %#x, want 0x114", f)
		}
		wantRV(t, tr.CallOnce(t, a.RunDir, "write_lockspace", "ls2", ls2Path, "0", "0", "0x110", "0", "1", "0"), 0)
	})

	t.Run("set_config IO_TIMEOUT", func(t *testing.T) {
		// The value in force (10), so that the hosts' timing stays as it is.
		r := exchange(t, sa, request(cmdSetConfig, 0, 0x10, 10, lockspace("ls1", 0, 0, "", 0)), wait)
		wantResult(t, "SET_CONFIG IO_TIMEOUT", r, 0)
		if r.Data2 != 10 {
			t.Errorf("SET_CONFIG IO_TIMEOUT: %s, want data2 10 echoed", r)
		}
		wantRV(t, tr.CallOnce(t, b.RunDir, "set_config", "ls1", "0", "16", "10"), 0)
	})

	// A lease holder on A: the driver, registered.
	holder := tr.StartDriver(t, a.RunDir)
	wantRV(t, holder.Call(t, 0, "register"), 3)
	wantRV(t, holder.Call(t, 0, "acquire", "ls1", "r1", resPath, "0", "0", "0", "self"), 0)

	t.Run("acquire2", func(t *testing.T) {
		// From an unregistered connection with data2 -1: -16.
		req := request(cmdAcquire2, 0, 1, 0xffffffff, resource("ls1", "r1", 0, resPath, 0), make([]byte, optionsSize))
		wantResult(t, "ACQUIRE2 unregistered", exchange(t, sb, req, wait), -16)
		// Wait until B has seen host 1 renew: before that the owner
		// record of the -243 reply has flags 0x15 and no name (seen when
		// acquire2 came right after the NODELAY joins).
		waitLive(t, sb, 1)
		// From B's registered connection: B watches host 1 alive, then
		// -243 with the owner.
		c := register(t, sb)
		r := exchangeOn(t, c, req, 2*time.Minute)
		wantResult(t, "ACQUIRE2 held by A", r, -243)
		if r.Length != 112 || r.Data2 != 0xffffffff || len(r.Body) != hostSize+nameLen {
			t.Fatalf("ACQUIRE2 -243: %s, want length 112 and data2 0xffffffff", r)
		}
		h := parseHost(r.Body)
		// flags is B's view of host 1: LIVE (0x3) here; 0x1 (UNKNOWN) and
		// 0x15 were seen earlier after the join.
		if h.HostID != 1 || h.Generation != 1 || h.Timestamp == 0 || h.IOTimeout != 0 || h.Flags != 0x3 {
			t.Errorf("ACQUIRE2 owner %+v, want host 1 generation 1, a timestamp, io 0, flags 0x3", h)
		}
		if n := cstr(r.Body[hostSize:]); n != "hostA" {
			t.Errorf("ACQUIRE2 owner name %q, want hostA", n)
		}
		// The same through libsanlock.
		other := tr.StartDriver(t, b.RunDir)
		wantRV(t, other.Call(t, 0, "register"), 3)
		r2 := other.Call(t, 2*time.Minute, "acquire2", "ls1", "r1", resPath, "0", "0", "0", "self")
		wantRV(t, r2, -243)
		if r2.Field("owner_host_id") != 1 || r2.Fields["owner_name"] != "hostA" || r2.Field("owner_flags") != 3 {
			t.Errorf("driver: %s", r2.Line)
		}
	})

	t.Run("release NO_DISK", func(t *testing.T) {
		wantRV(t, holder.Call(t, 0, "release", "ls1", "r1", resPath, "0", "0", "0x8", "self"), 0)
		// The leader on disk still names host 1 (owner_id at 32).
		buf := make([]byte, 512)
		f, err := os.Open(resPath)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.ReadAt(buf, 0); err != nil {
			t.Fatal(err)
		}
		if o := le.Uint64(buf[32:]); o != 1 {
			t.Errorf("leader owner after RELEASE NO_DISK: %d, want 1", o)
		}
		// The raw form: RELEASE with NO_DISK sends the resource without disks.
		c := register(t, sa)
		wantResult(t, "RELEASE NO_DISK of nothing held", exchangeOn(t, c, request(cmdRelease, 0x8, 1, 0xffffffff, resource("ls1", "r1", 0, "", 0)), wait), -1)
	})

	t.Run("FOR_CLIENT_ID", func(t *testing.T) {
		ci := clientIndex(t, a, holder.Pid)
		acq := request(cmdAcquire, 0x10, 1, ci, resource("ls1", "r1", 0, resPath, 0), make([]byte, optionsSize))
		wantResult(t, "ACQUIRE FOR_CLIENT_ID", exchange(t, sa, acq, wait), 0)
		r := exchange(t, sa, request(cmdInquire, 0x10, 0, ci), wait)
		wantResult(t, "INQUIRE FOR_CLIENT_ID", r, 0)
		if r.Data2 != 1 || !strings.HasPrefix(cstr(r.Body), "ls1:r1:"+resPath+":0:") {
			t.Errorf("INQUIRE FOR_CLIENT_ID: %s %q", r, cstr(r.Body))
		}
		// The lease is the holder's: its own inquire sees it.
		r2 := holder.Call(t, 0, "inquire", "0", "self")
		if r2.RV != 0 || r2.Field("count") != 1 {
			t.Errorf("holder's inquire: %s", r2.Line)
		}
		wantResult(t, "RELEASE FOR_CLIENT_ID", exchange(t, sa, request(cmdRelease, 0x10, 1, ci, resource("ls1", "r1", 0, "", 0)), wait), 0)
		// Through libsanlock, and an index nobody has.
		wantRV(t, tr.CallOnce(t, a.RunDir, "acquire", "ls1", "r1", resPath, "0", "0", "0x10", fmt.Sprint(ci)), 0)
		wantRV(t, tr.CallOnce(t, a.RunDir, "release", "ls1", "r1", resPath, "0", "0", "0x10", fmt.Sprint(ci)), 0)
		wantResult(t, "ACQUIRE FOR_CLIENT_ID unknown", exchange(t, sa, request(cmdAcquire, 0x10, 1, 60, resource("ls1", "r1", 0, resPath, 0), make([]byte, optionsSize)), wait), -16)
	})

	t.Run("set_host DEAD_EXT", func(t *testing.T) {
		// host_id 0 in the lockspace: -22; a lockspace A has not joined: -2.
		wantResult(t, "SET_HOST host_id 0", exchange(t, sa, request(cmdSetHost, 0, 1, 0, lockspace("ls1", 0, 0, lsPath, 0), hostRec(2, 1, 0, 0, 0)), wait), -22)
		wantResult(t, "SET_HOST not joined", exchange(t, sa, request(cmdSetHost, 0, 1, 0, lockspace("ls2", 1, 0, ls2Path, 0), hostRec(2, 1, 0, 0, 0)), wait), -2)
		// A declares B (host 2) dead, naming a generation B does not
		// have: 5.1.1 takes it, writes it and DEAD_EXT into B's sector,
		// and B's next renewal fails (-263): B leaves the lockspace.
		wantResult(t, "SET_HOST DEAD_EXT", exchange(t, sa, request(cmdSetHost, 0, 1, 0, lockspace("ls1", 1, 0, lsPath, 0), hostRec(2, 7, 0, 0, 0)), wait), 0)
		buf := make([]byte, 512)
		f, err := os.Open(lsPath)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.ReadAt(buf, 512); err != nil {
			t.Fatal(err)
		}
		if g, fl, x := le.Uint64(buf[40:]), le.Uint32(buf[8:]), le.Uint32(buf[160:]); g != 7 || fl&0x4 == 0 || x != 0x00010001 {
			t.Errorf("host 2's sector after DEAD_EXT: generation %d flags %#x word at 160 %#x, want 7, 0x4 set, 0x10001", g, fl, x)
		}
		deadline := time.Now().Add(90 * time.Second)
		for {
			r := exchange(t, sb, request(cmdGetLockspaces, 0, 0, 0), wait)
			if r.result() == 0 && len(r.Body) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("B still has ls1 90 s after DEAD_EXT: %s", r)
			}
			time.Sleep(time.Second)
		}
		if !strings.Contains(b.Log(), "-263") {
			t.Errorf("B's log has no -263")
		}
	})
}
