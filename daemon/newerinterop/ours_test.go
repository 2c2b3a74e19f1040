package newerinterop

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/internal/debtree"
	"github.com/gosanlock/gosanlock/internal/testutil"
)

// startOurs starts our sanlock binary as a daemon process with runDir as
// its SANLOCK_RUN_DIR and returns its socket; it is killed by pid at
// cleanup.
func startOurs(t *testing.T) string {
	t.Helper()
	bin := testutil.SanlockBinary(t)
	dir := testutil.ShortTempDir(t)
	var out bytes.Buffer
	cmd := exec.Command(bin, "daemon", "-D", "-w", "0", "-l", "0", "-U", "root", "-G", "root", "-e", "ours")
	cmd.Env = append(os.Environ(), "SANLOCK_PRIVILEGED=0", "SANLOCK_RUN_DIR="+dir)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	sock := filepath.Join(dir, "sanlock.sock")
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return sock
		}
		select {
		case <-done:
			t.Fatalf("our daemon exited: %s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("our daemon: no socket after 20 s: %s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// oursEnv is what the one-host cases work on, per daemon: the socket,
// the lease files (ls joined as ls1 host 1, ls2 a second lockspace area,
// ls3 an empty file, rf the resource r1 at 0 and r2 at 1 MiB), and the
// registered connection with its client index.
type oursEnv struct {
	sock, ls, ls2, ls3, rf string
	reg                    net.Conn
	ci                     uint32
}

// oursCase is one request of TestOursBeside511. want is 5.1.1's result;
// ours answers the same, with the same length, data2 and (through body)
// the same payload, unless differs says why not (docs/compat.md): then
// oursWant is our result.
type oursCase struct {
	name string
	do   func(t *testing.T, e *oursEnv) reply
	want int32
	// body normalises a reply's payload for the comparison (nil: compare
	// result, length and data2 only).
	body     func(r reply) string
	differs  string
	oursWant int32
}

func send(t *testing.T, e *oursEnv, req []byte) reply {
	return exchange(t, e.sock, req, 10*time.Second)
}

func onReg(t *testing.T, e *oursEnv, req []byte) reply {
	return exchangeOn(t, e.reg, req, time.Minute)
}

// lsHostBody is READ_LOCKSPACE_HOST's payload without the path and the
// timestamp: name, host_id and flags of the lockspace; the host record.
func lsHostBody(r reply) string {
	if len(r.Body) != lockspaceSize+hostSize {
		return fmt.Sprintf("%d bytes", len(r.Body))
	}
	ls := r.Body[:lockspaceSize]
	h := parseHost(r.Body[lockspaceSize:])
	if h.Timestamp != 0 && h.Timestamp != 1234 {
		h.Timestamp = 1 // a renewal's: differs by daemon
	}
	return fmt.Sprintf("ls %q host_id %d flags %#x; host %+v", cstr(ls[:nameLen]), le.Uint64(ls[48:]), le.Uint32(ls[56:]), h)
}

// lsBody is READ_LOCKSPACE's payload without the path.
func lsBody(r reply) string {
	if len(r.Body) != lockspaceSize {
		return fmt.Sprintf("%d bytes", len(r.Body))
	}
	return fmt.Sprintf("ls %q host_id %d flags %#x", cstr(r.Body[:nameLen]), le.Uint64(r.Body[48:]), le.Uint32(r.Body[56:]))
}

// leaderOwner is the owner_id and whether the timestamp is set in the
// paxos leader at off of path.
func leaderOwner(t *testing.T, path string, off int64) string {
	b := make([]byte, 512)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("owner %d held %v", le.Uint64(b[32:]), le.Uint64(b[152:]) != 0)
}

var tmpPath = regexp.MustCompile(`/var/tmp/[^:]*`)

var oursCases = []oursCase{
	{name: "get_hosts LOCAL", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdGetHosts, 0x1, 0, 0, lockspace("ls1", 7, 0, "", 0)))
	}, body: func(r reply) string {
		// The flags and timestamp depend on whether the first renewal
		// was read: 0x15 and 0 at first in 5.1.1, UNKNOWN in ours.
		h := parseHost(r.Body)
		return fmt.Sprintf("host_id %d generation %d", h.HostID, h.Generation)
	}},
	{name: "get_hosts LOCAL, unknown lockspace", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdGetHosts, 0x1, 0, 0, lockspace("nope", 0, 0, "", 0)))
	}, want: -2, differs: "5.1.1 announces length 64 and data2 1 and sends no payload; ours a plain result", oursWant: -2},
	{name: "read_lockspace_host host 1", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdReadLSHost, 0, 0, 0, lockspace("", 1, 0, e.ls, 0)))
	}, body: lsHostBody},
	{name: "read_lockspace_host host 0", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdReadLSHost, 0, 0, 0, lockspace("ls1", 0, 0, e.ls, 0)))
	}, body: lsHostBody},
	{name: "read_lockspace_host host 2000", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdReadLSHost, 0, 0, 0, lockspace("", 2000, 0x110, e.ls, 0)))
	}, body: lsHostBody},
	{name: "read_lockspace_host host 3000", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdReadLSHost, 0, 0, 0, lockspace("", 3000, 0, e.ls, 0)))
	}, want: -90, body: lsHostBody},
	{name: "read_lockspace_host no path", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdReadLSHost, 0, 0, 0, lockspace("ls1", 1, 0, "", 0)))
	}, want: -19, body: lsHostBody},
	{name: "read_lockspace_host other name", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdReadLSHost, 0, 0, 0, lockspace("qq", 1, 0, e.ls, 0)))
	}, want: -226, body: lsHostBody},
	{name: "read_lockspace_host no lease", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdReadLSHost, 0, 0, 0, lockspace("", 1, 0, e.ls3, 0)))
	}, want: -223, body: lsHostBody},
	{name: "init_lockspace_host NO_CAW io 0", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdInitLSHost, 0x2, 0, 0, lockspace("ls2", 5, 0, e.ls2, 0), leaderRec(5, 3, "hostfive", 1234)))
	}},
	{name: "read_lockspace_host after init", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdReadLSHost, 0, 0, 0, lockspace("ls2", 5, 0, e.ls2, 0)))
	}, body: lsHostBody},
	{name: "init_lockspace_host host_id 0", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdInitLSHost, 0x2, 0, 20, lockspace("ls2", 0, 0, e.ls2, 0), leaderRec(0, 1, "zero", 55)))
	}, want: -22},
	{name: "init_lockspace_host USE_CAW|NO_CAW", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdInitLSHost, 0x3, 0, 20, lockspace("ls2", 8, 0, e.ls2, 0), leaderRec(8, 1, "eight", 55)))
	}},
	{name: "read_lockspace_host after USE_CAW|NO_CAW", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdReadLSHost, 0, 0, 0, lockspace("ls2", 8, 0, e.ls2, 0)))
	}, body: lsHostBody},
	{name: "init_lockspace_host neither CAW flag", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdInitLSHost, 0, 0, 0, lockspace("ls2", 6, 0, e.ls2, 0), leaderRec(6, 4, "hostsix", 99)))
	}},
	{name: "read_lockspace_host after neither", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdReadLSHost, 0, 0, 0, lockspace("ls2", 6, 0, e.ls2, 0)))
	}, body: lsHostBody, differs: "5.1.1 marks the lease CAW (flags 0x118) even on a file; ours writes no CAW mark (0x110)"},
	{name: "write_lockspace LS_FLAGS 0", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdWriteLockspace, 0x1, 0, 0, lockspace("ls2", 0, 0, e.ls2, 0)))
	}, want: -22},
	{name: "write_lockspace LS_FLAGS 0x10 (no sector)", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdWriteLockspace, 0x1, 0, 0, lockspace("ls2", 0, 0x10, e.ls2, 0)))
	}, want: -1},
	{name: "write_lockspace LS_FLAGS 0x100 (no align)", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdWriteLockspace, 0x1, 0, 0, lockspace("ls2", 0, 0x100, e.ls2, 0)))
	}, want: -1},
	{name: "write_lockspace LS_FLAGS 0x120 (other align)", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdWriteLockspace, 0x1, 0, 0, lockspace("ls2", 0, 0x120, e.ls2, 0)))
	}, want: -1},
	{name: "write_lockspace LS_FLAGS 0x114", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdWriteLockspace, 0x1, 0, 0, lockspace("ls2", 0, 0x114, e.ls2, 0)))
	}},
	{name: "read_lockspace after LS_FLAGS 0x114", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdReadLockspace, 0, 0, 0, lockspace("", 1, 0, e.ls2, 0)))
	}, body: lsBody},
	{name: "read_lockspace_host after LS_FLAGS 0x114", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdReadLSHost, 0, 0, 0, lockspace("ls2", 5, 0, e.ls2, 0)))
	}, body: lsHostBody},
	{name: "write_lockspace LS_FLAGS 0x110", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdWriteLockspace, 0x1, 0, 0, lockspace("ls2", 0, 0x110, e.ls2, 0)))
	}},
	{name: "read_lockspace after LS_FLAGS 0x110", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdReadLockspace, 0, 0, 0, lockspace("", 1, 0, e.ls2, 0)))
	}, body: lsBody},
	{name: "write_lockspace LS_FLAGS where no lockspace is", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdWriteLockspace, 0x1, 0, 0, lockspace("ls3", 0, 0x110, e.ls3, 0)))
	}, differs: "5.1.1 answers 0 and writes nothing; ours refuses", oursWant: -223},
	{name: "set_config IO_TIMEOUT 0", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdSetConfig, 0, 0x10, 0, lockspace("ls1", 0, 0, "", 0)))
	}, want: -22},
	{name: "set_config IO_TIMEOUT, unknown lockspace", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdSetConfig, 0, 0x10, 10, lockspace("nope", 0, 0, "", 0)))
	}, want: -2},
	{name: "set_config IO_TIMEOUT 100000", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdSetConfig, 0, 0x10, 100000, lockspace("ls1", 0, 0, "", 0)))
	}, differs: "ours takes 1..255 (the lease keeps 8 bits; a renewal every 2 days is no renewal)", oursWant: -22},
	{name: "set_config IO_TIMEOUT 0x11", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdSetConfig, 0, 0x11, 10, lockspace("ls1", 0, 0, "", 0)))
	}, want: -22},
	{name: "set_config IO_TIMEOUT 10", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdSetConfig, 0, 0x10, 10, lockspace("ls1", 0, 0, "", 0)))
	}},
	{name: "acquire FOR_CLIENT_ID, no such client", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdAcquire, 0x10, 1, 60, resource("ls1", "r1", 0, e.rf, 0), make([]byte, optionsSize)))
	}, want: -16},
	{name: "inquire FOR_CLIENT_ID, no such client", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdInquire, 0x10, 0, 60))
	}, want: -16},
	{name: "acquire2 unregistered", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdAcquire2, 0, 1, 0xffffffff, resource("ls1", "r1", 0, e.rf, 0), make([]byte, optionsSize)))
	}, want: -16},
	{name: "release NO_DISK, nothing held", do: func(t *testing.T, e *oursEnv) reply {
		return onReg(t, e, request(cmdRelease, 0x8, 1, 0xffffffff, resource("ls1", "r1", 0, "", 0)))
	}, want: -1},
	{name: "acquire FOR_CLIENT_ID", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdAcquire, 0x10, 1, e.ci, resource("ls1", "r1", 0, e.rf, 0), make([]byte, optionsSize)))
	}},
	{name: "inquire FOR_CLIENT_ID", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdInquire, 0x10, 0, e.ci))
	}, body: func(r reply) string {
		return tmpPath.ReplaceAllString(cstr(r.Body), "PATH")
	}},
	{name: "convert FOR_CLIENT_ID to shared", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdConvert, 0x10, 0, e.ci, resource("ls1", "r1", 0x4, "", 0)))
	}},
	{name: "inquire FOR_CLIENT_ID after convert", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdInquire, 0x10, 0, e.ci))
	}, body: func(r reply) string {
		return tmpPath.ReplaceAllString(cstr(r.Body), "PATH")
	}},
	{name: "convert FOR_CLIENT_ID to exclusive", do: func(t *testing.T, e *oursEnv) reply {
		return send(t, e, request(cmdConvert, 0x10, 0, e.ci, resource("ls1", "r1", 0, "", 0)))
	}},
	{name: "release NO_DISK|FOR_CLIENT_ID", do: func(t *testing.T, e *oursEnv) reply {
		r := send(t, e, request(cmdRelease, 0x18, 1, e.ci, resource("ls1", "r1", 0, "", 0)))
		t.Logf("leader after NO_DISK: %s", leaderOwner(t, e.rf, 0))
		return r
	}},
	{name: "leader after NO_DISK", do: func(t *testing.T, e *oursEnv) reply {
		// Not a request: the leader on disk, as the reply's body.
		return reply{Body: []byte(leaderOwner(t, e.rf, 0))}
	}, body: func(r reply) string { return string(r.Body) }},
	{name: "inquire after NO_DISK", do: func(t *testing.T, e *oursEnv) reply {
		return onReg(t, e, request(cmdInquire, 0, 0, 0xffffffff))
	}},
	{name: "acquire2 after NO_DISK", do: func(t *testing.T, e *oursEnv) reply {
		return onReg(t, e, request(cmdAcquire2, 0, 1, 0xffffffff, resource("ls1", "r1", 0, e.rf, 0), make([]byte, optionsSize)))
	}},
	{name: "inquire after acquire2", do: func(t *testing.T, e *oursEnv) reply {
		return onReg(t, e, request(cmdInquire, 0, 0, 0xffffffff))
	}, body: func(r reply) string {
		s := cstr(r.Body)
		return s[strings.LastIndexByte(s, ':'):] // the lver
	}},
	{name: "release", do: func(t *testing.T, e *oursEnv) reply {
		return onReg(t, e, request(cmdRelease, 0, 1, 0xffffffff, resource("ls1", "r1", 0, "", 0)))
	}},
	{name: "leader after release", do: func(t *testing.T, e *oursEnv) reply {
		return reply{Body: []byte(leaderOwner(t, e.rf, 0))}
	}, body: func(r reply) string { return string(r.Body) }},
}

// TestOursBeside511 sends the same requests, one host each, to the
// 5.1.1 daemon and to ours (each in a lockspace of its own it joined with
// NODELAY), requires 5.1.1's answers as pinned, and requires ours to
// answer the same (result, length, data2 and the payload as the case
// normalises it), except where a case names the difference
// (docs/compat.md). Ours must keep answering VERSION after each.
func TestOursBeside511(t *testing.T) {
	t.Parallel()
	tr := debtree.Get(t, "sid")
	real := tr.StartDaemon(t, "", "-e", "real")
	ours := startOurs(t)

	type answer struct {
		r         reply
		versionOK bool
	}
	run := func(sock string) []answer {
		files := leaseFiles(t, "ls", "ls2", "ls3", "rf")
		e := &oursEnv{sock: sock, ls: files[0], ls2: files[1], ls3: files[2], rf: files[3]}
		wantResult(t, "WRITE_LOCKSPACE", send(t, e, request(cmdWriteLockspace, 0, 0, 0, lockspace("ls1", 0, 0, e.ls, 0))), 0)
		wantResult(t, "WRITE_LOCKSPACE ls2", send(t, e, request(cmdWriteLockspace, 0, 0, 0, lockspace("ls2", 0, 0, e.ls2, 0))), 0)
		wantResult(t, "WRITE_RESOURCE", send(t, e, request(cmdWriteResource, 0, 0, 0, resource("ls1", "r1", 0, e.rf, 0))), 0)
		start := time.Now()
		wantResult(t, "ADD_LOCKSPACE NODELAY", exchange(t, sock, request(cmdAddLockspace, 0x2, 0, 0, lockspace("ls1", 1, 0, e.ls, 0)), 2*time.Minute), 0)
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: NODELAY join took %v (5.1.1: about 1 s)", sock, d)
		}
		e.reg = register(t, sock)
		e.ci = clientIndexIn(t, filepath.Dir(sock), os.Getpid())
		var out []answer
		for _, c := range oursCases {
			r := c.do(t, e)
			v := exchange(t, sock, request(cmdVersion, 0, 0, 0), 5*time.Second)
			out = append(out, answer{r, !v.NoReply && !v.Closed && v.result() == 0})
		}
		if sock == ours {
			// LS_FLAGS on the lockspace it has joined is refused (5.1.1
			// rewrites it and its own next renewal fails), and the
			// lockspace stays.
			wantResult(t, "ours: LS_FLAGS on the joined lockspace", send(t, e, request(cmdWriteLockspace, 0x1, 0, 0, lockspace("ls1", 0, 0x114, e.ls, 0))), -16)
			r := send(t, e, request(cmdReadLockspace, 0, 0, 0, lockspace("", 1, 0, e.ls, 0)))
			if lsBody(r) != `ls "ls1" host_id 1 flags 0x110` {
				t.Errorf("ours: after the refused LS_FLAGS: %s", lsBody(r))
			}
		}
		return out
	}
	got511 := run(real.SocketPath())
	gotOurs := run(ours)

	var tab strings.Builder
	fmt.Fprintf(&tab, "%-45s | %-45s | %s\n", "case", "5.1.1", "ours")
	for i, c := range oursCases {
		a, o := got511[i], gotOurs[i]
		if a.r.NoReply || a.r.Closed || a.r.result() != c.want {
			t.Errorf("%s: 5.1.1 answered %s, want %d", c.name, a.r, c.want)
		}
		if !a.versionOK || !o.versionOK {
			t.Errorf("%s: VERSION afterwards: 5.1.1 %v, ours %v", c.name, a.versionOK, o.versionOK)
		}
		fmt.Fprintf(&tab, "%-45s | %-45s | %s\n", c.name, a.r, o.r)
		if c.differs != "" {
			if o.r.NoReply || o.r.Closed || o.r.result() != c.oursWant {
				t.Errorf("%s: ours answered %s, want %d (%s)", c.name, o.r, c.oursWant, c.differs)
			}
			if c.body != nil {
				t.Logf("%s: 5.1.1 %s; ours %s (%s)", c.name, c.body(a.r), c.body(o.r), c.differs)
			}
			continue
		}
		if o.r.NoReply || o.r.Closed || o.r.result() != a.r.result() || o.r.Length != a.r.Length || o.r.Data2 != a.r.Data2 {
			t.Errorf("%s: ours answered %s, 5.1.1 %s", c.name, o.r, a.r)
			continue
		}
		if c.body != nil {
			if wa, wo := c.body(a.r), c.body(o.r); wa != wo {
				t.Errorf("%s: ours %s, 5.1.1 %s", c.name, wo, wa)
			}
		}
	}
	t.Logf("answers:\n%s", tab.String())
}

// TestAcquire2Held: ours (host 2, "ours") and 5.1.1 (host 1, "real")
// share a lockspace; each holds one lease, and each asks for the other's
// lease with ACQUIRE2. Both answer -243 with the owner: length 112, data2
// echoed, the owner's host_id, generation and leader timestamp, io_timeout
// 0, flags = the asking daemon's view of the owner (LIVE once it has seen
// it renew) and the owner's host name from its delta lease. Ours' reply
// must have the shape and values of 5.1.1's.
func TestAcquire2Held(t *testing.T) {
	t.Parallel()
	tr := debtree.Get(t, "sid")
	real := tr.StartDaemon(t, "", "-e", "real")
	ours := startOurs(t)
	sr := real.SocketPath()
	files := leaseFiles(t, "ls", "rf")
	ls, rf := files[0], files[1]
	const wait = 10 * time.Second
	wantResult(t, "WRITE_LOCKSPACE", exchange(t, ours, request(cmdWriteLockspace, 0, 0, 0, lockspace("ls1", 0, 0, ls, 0)), wait), 0)
	wantResult(t, "WRITE_RESOURCE r1", exchange(t, ours, request(cmdWriteResource, 0, 0, 0, resource("ls1", "r1", 0, rf, 0)), wait), 0)
	wantResult(t, "WRITE_RESOURCE r2", exchange(t, ours, request(cmdWriteResource, 0, 0, 0, resource("ls1", "r2", 0, rf, 1<<20)), wait), 0)
	wantResult(t, "ADD_LOCKSPACE real", exchange(t, sr, request(cmdAddLockspace, 0x2, 0, 0, lockspace("ls1", 1, 0, ls, 0)), time.Minute), 0)
	wantResult(t, "ADD_LOCKSPACE ours", exchange(t, ours, request(cmdAddLockspace, 0x2, 0, 0, lockspace("ls1", 2, 0, ls, 0)), time.Minute), 0)

	hr, ho := register(t, sr), register(t, ours)
	opts := make([]byte, optionsSize)
	wantResult(t, "real acquires r1", exchangeOn(t, hr, request(cmdAcquire, 0, 1, 0xffffffff, resource("ls1", "r1", 0, rf, 0), opts), time.Minute), 0)
	wantResult(t, "ours acquires r2", exchangeOn(t, ho, request(cmdAcquire, 0, 1, 0xffffffff, resource("ls1", "r2", 0, rf, 1<<20), opts), time.Minute), 0)
	waitLive(t, ours, 1)
	waitLive(t, sr, 2)

	type got struct {
		r    reply
		h    host
		name string
	}
	ask := func(sock, res string, off uint64) got {
		c := register(t, sock)
		r := exchangeOn(t, c, request(cmdAcquire2, 0, 1, 0xffffffff, resource("ls1", res, 0, rf, off), opts), 2*time.Minute)
		g := got{r: r}
		if len(r.Body) == hostSize+nameLen {
			g.h, g.name = parseHost(r.Body), cstr(r.Body[hostSize:])
		}
		return g
	}
	var g511, gOurs got
	done := make(chan struct{})
	go func() { defer close(done); g511 = ask(sr, "r2", 1<<20) }()
	gOurs = ask(ours, "r1", 0)
	<-done
	for _, c := range []struct {
		who   string
		g     got
		owner uint64
		name  string
	}{{"5.1.1 asking for ours' r2", g511, 2, "ours"}, {"ours asking for 5.1.1's r1", gOurs, 1, "real"}} {
		r := c.g.r
		if r.NoReply || r.Closed || r.result() != -243 || r.Length != 112 || r.Data2 != 0xffffffff {
			t.Errorf("%s: %s, want -243, length 112, data2 0xffffffff", c.who, r)
			continue
		}
		if h := c.g.h; h.HostID != c.owner || h.Generation != 1 || h.Timestamp == 0 || h.IOTimeout != 0 || h.Flags != 0x3 {
			t.Errorf("%s: owner %+v, want host %d generation 1, a timestamp, io 0, flags 0x3 (LIVE)", c.who, h, c.owner)
		}
		if c.g.name != c.name {
			t.Errorf("%s: owner name %q, want %q", c.who, c.g.name, c.name)
		}
	}
	// The tools: `client command -h 1` of 5.1.1 against 5.1.1 and ours
	// against ours print the same lines.
	type toolOut struct{ out string }
	var c511, cOurs toolOut
	done = make(chan struct{})
	go func() {
		defer close(done)
		b, _ := tr.Command(&debtree.Options{RunDir: real.RunDir}, "sanlock", "client", "command",
			"-r", "ls1:r2:"+rf+":1048576", "-h", "1", "-c", "/bin/true").CombinedOutput()
		c511.out = string(b)
	}()
	cmd := exec.Command(testutil.SanlockBinary(t), "client", "command", "-r", "ls1:r1:"+rf+":0", "-h", "1", "-c", "/bin/true")
	cmd.Env = append(os.Environ(), "SANLOCK_RUN_DIR="+filepath.Dir(ours))
	b, _ := cmd.CombinedOutput()
	cOurs.out = string(b)
	<-done
	ownerLine := regexp.MustCompile(`(?m)^owner: host_id (\d) generation 1 timestamp \d+ state LIVE name (\w+)$`)
	for _, c := range []struct{ who, out, id, name string }{{"5.1.1", c511.out, "2", "ours"}, {"ours", cOurs.out, "1", "real"}} {
		m := ownerLine.FindStringSubmatch(c.out)
		if !strings.Contains(c.out, "acquire done -243\n") || m == nil || m[1] != c.id || m[2] != c.name {
			t.Errorf("%s: client command -h 1 printed %q", c.who, c.out)
		}
	}

	// The leases stay where they were.
	wantResult(t, "real still holds r1", exchangeOn(t, hr, request(cmdInquire, 0, 0, 0xffffffff), wait), 0)
	wantResult(t, "ours still holds r2", exchangeOn(t, ho, request(cmdInquire, 0, 0, 0xffffffff), wait), 0)
}
