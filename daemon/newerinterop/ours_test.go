package newerinterop

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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

// oneHostCase is a request that needs one daemon only, in a lockspace
// ls1 it joined as host 1 (file ls) with a second lease area ls2 unused.
type oneHostCase struct {
	name string
	// req builds the request from the two lease files.
	req func(ls, ls2 string) []byte
	// registered sends it on a registered connection.
	registered bool
	// want is 5.1.1's result.
	want int32
}

var oneHostCases = []oneHostCase{
	{"get_hosts LOCAL", func(ls, _ string) []byte {
		return request(cmdGetHosts, 0x1, 0, 0, lockspace("ls1", 0, 0, "", 0))
	}, false, 0},
	{"read_lockspace_host (42)", func(ls, _ string) []byte {
		return request(cmdReadLSHost, 0, 0, 0, lockspace("", 1, 0, ls, 0))
	}, false, 0},
	{"init_lockspace_host (43) NO_CAW", func(_, ls2 string) []byte {
		return request(cmdInitLSHost, 0x2, 0, 10, lockspace("ls2", 5, 0, ls2, 0), leaderRec(5, 3, "hostfive", 1234))
	}, false, 0},
	{"set_host (44) host_id 0", func(ls, _ string) []byte {
		return request(cmdSetHost, 0, 1, 0, lockspace("ls1", 0, 0, ls, 0), hostRec(2, 1, 0, 0, 0))
	}, false, -22},
	{"write_lockspace LS_FLAGS 0", func(_, ls2 string) []byte {
		return request(cmdWriteLockspace, 0x1, 0, 0, lockspace("ls2", 0, 0, ls2, 0))
	}, false, -22},
	{"write_lockspace LS_FLAGS 0x114", func(_, ls2 string) []byte {
		return request(cmdWriteLockspace, 0x1, 0, 0, lockspace("ls2", 0, 0x114, ls2, 0))
	}, false, 0},
	{"set_config IO_TIMEOUT 10", func(_, _ string) []byte {
		return request(cmdSetConfig, 0, 0x10, 10, lockspace("ls1", 0, 0, "", 0))
	}, false, 0},
	{"release NO_DISK, nothing held", func(_, _ string) []byte {
		return request(cmdRelease, 0x8, 1, 0xffffffff, resource("ls1", "r1", 0, "", 0))
	}, true, -1},
	{"acquire FOR_CLIENT_ID, no such client", func(ls, _ string) []byte {
		return request(cmdAcquire, 0x10, 1, 60, resource("ls1", "r1", 0, ls, 1<<20), make([]byte, optionsSize))
	}, false, -16},
	{"inquire FOR_CLIENT_ID, no such client", func(_, _ string) []byte {
		return request(cmdInquire, 0x10, 0, 60)
	}, false, -16},
}

// TestOursBeside511 sends the one-host cases (never command 41: ours
// re-executes itself on it) to the 5.1.1 daemon and to ours, requires
// 5.1.1's answers, and prints ours beside them, with whether ours still
// answers VERSION afterwards. It asserts nothing about ours: our daemon
// does not implement these commands and flags yet; the table is what
// that work starts from.
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
		files := leaseFiles(t, "ls", "ls2")
		ls, ls2 := files[0], files[1]
		wantResult(t, "WRITE_LOCKSPACE", exchange(t, sock, request(cmdWriteLockspace, 0, 0, 0, lockspace("ls1", 0, 0, ls, 0)), 10*time.Second), 0)
		wantResult(t, "WRITE_LOCKSPACE ls2", exchange(t, sock, request(cmdWriteLockspace, 0, 0, 0, lockspace("ls2", 0, 0, ls2, 0)), 10*time.Second), 0)
		start := time.Now()
		add := exchange(t, sock, request(cmdAddLockspace, 0x2, 0, 0, lockspace("ls1", 1, 0, ls, 0)), 2*time.Minute)
		t.Logf("add_lockspace NODELAY: %s after %v", add, time.Since(start).Round(100*time.Millisecond))
		var out []answer
		for _, c := range oneHostCases {
			var r reply
			if c.registered {
				conn := register(t, sock)
				r = exchangeOn(t, conn, c.req(ls, ls2), 5*time.Second)
				conn.Close()
			} else {
				r = exchange(t, sock, c.req(ls, ls2), 5*time.Second)
			}
			v := exchange(t, sock, request(cmdVersion, 0, 0, 0), 5*time.Second)
			out = append(out, answer{r, !v.NoReply && !v.Closed && v.result() == 0})
		}
		return out
	}
	got511 := run(real.SocketPath())
	gotOurs := run(ours)

	var tab strings.Builder
	fmt.Fprintf(&tab, "%-40s | %-45s | %s\n", "case", "5.1.1", "ours")
	for i, c := range oneHostCases {
		a, o := got511[i], gotOurs[i]
		if a.r.NoReply || a.r.Closed || a.r.result() != c.want {
			t.Errorf("%s: 5.1.1 answered %s, want %d", c.name, a.r, c.want)
		}
		if !a.versionOK {
			t.Errorf("%s: 5.1.1 did not answer VERSION afterwards", c.name)
		}
		same := ""
		if !o.r.NoReply && !o.r.Closed && o.r.result() == a.r.result() && o.r.Length == a.r.Length {
			same = " (same result and length)"
		}
		fmt.Fprintf(&tab, "%-40s | %-45s | %s%s, VERSION after: %v\n", c.name, a.r, o.r, same, o.versionOK)
	}
	t.Logf("answers:\n%s", tab.String())
}
