package lease_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/internal/testenv"
	"github.com/gosanlock/gosanlock/internal/testutil/inproc"
	"github.com/gosanlock/gosanlock/lease"
)

// The examples and the tests run against a daemon inside the test
// process (internal/testutil/inproc: a real lease manager over an
// in-memory disk), so they need neither root nor a sanlock binary; the
// tests that compare with sanlock 3.8.5 add it as a real daemon when they
// can (daemonKinds). TestMain starts the examples' daemon with its run
// directory as $SANLOCK_RUN_DIR (so lease.Config{} finds it) and joins its
// lockspace "LS" as host 1; leases is its lease file, with resources R1,
// R2, R3 at 1, 2 and 3 MiB.
var leases string

const realSanlock = "/usr/sbin/sanlock"

const mib = 1 << 20

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	d, err := inproc.Start(3)
	if err != nil {
		fmt.Println("in-process daemon:", err)
		return 1
	}
	defer d.Stop()
	leases = d.Path
	os.Setenv("SANLOCK_RUN_DIR", d.RunDir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ls := &client.Lockspace{Name: "LS", HostID: 1, Disk: client.Disk{Path: d.Path}}
	if err := d.Client().AddLockspace(ctx, ls, 0, 1); err != nil {
		fmt.Println("join LS:", err)
		return 1
	}
	return m.Run()
}

// inprocDaemon is a testDaemon inside the test process (its own, not the
// examples' one).
func inprocDaemon(t *testing.T) *testDaemon {
	d := inproc.StartT(t, 3)
	return &testDaemon{name: "in-process", runDir: d.RunDir, leases: d.Path, kill: d.Stop,
		output: func() string { return "" }}
}

// realDaemon starts sanlock 3.8.5 as a real daemon; it needs root.
func realDaemon(t *testing.T) *testDaemon {
	testenv.NeedRoot(t, "sanlock 3.8.5 runs as a real daemon")
	testenv.NeedBinary(t, realSanlock)
	d, err := startDaemon(realSanlock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon output:\n%s", d.output())
		}
		d.stop()
	})
	return &d.testDaemon
}

// daemonKinds are the daemons the behaviour tests run against: ours in
// the test process, and sanlock 3.8.5 (which skips, or fails in CI,
// without root or the binary).
var daemonKinds = map[string]func(*testing.T) *testDaemon{"go": inprocDaemon, "c": realDaemon}

// testDaemon is a daemon with a private run directory and a lease file:
// lockspace "LS" at offset 0, resources R1, R2, R3 at 1, 2 and 3 MiB.
type testDaemon struct {
	name   string // what runs it
	runDir string
	leases string
	// kill ends the daemon at once: its clients see it gone.
	kill func()
	// output is the end of the daemon's output.
	output func() string
}

// procDaemon is a daemon process (sanlock 3.8.5), its lease file under
// /var/tmp.
type procDaemon struct {
	testDaemon
	dir    string
	cmd    *exec.Cmd
	out    *syncBuf
	exited chan struct{}
}

// startDaemon starts `bin daemon -D -w 0 -l 0 -U root -G root` and writes
// the lease file with bin's direct init (io_timeout 1).
func startDaemon(bin string) (*procDaemon, error) {
	dir, err := os.MkdirTemp("/var/tmp", "leaseapi-")
	if err != nil {
		return nil, err
	}
	d := &procDaemon{testDaemon: testDaemon{name: bin, runDir: filepath.Join(dir, "run"),
		leases: filepath.Join(dir, "leases")}, dir: dir, out: new(syncBuf), exited: make(chan struct{})}
	d.kill = func() { _ = d.cmd.Process.Kill() }
	d.output = d.lastLines
	if err := os.Mkdir(d.runDir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(d.leases, make([]byte, 4*mib), 0o600); err != nil {
		return nil, err
	}
	inits := [][]string{
		{"direct", "init", "-o", "1", "-s", "LS:0:" + d.leases + ":0"},
		{"direct", "init", "-r", "LS:R1:" + d.leases + ":1M"},
		{"direct", "init", "-r", "LS:R2:" + d.leases + ":2M"},
		{"direct", "init", "-r", "LS:R3:" + d.leases + ":3M"},
	}
	for _, a := range inits {
		if out, err := exec.Command(bin, a...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%s %v: %v: %s", bin, a, err, out)
		}
	}
	d.cmd = exec.Command(bin, "daemon", "-D", "-w", "0", "-l", "0", "-U", "root", "-G", "root")
	d.cmd.Env = append(os.Environ(), "SANLOCK_PRIVILEGED=0", "SANLOCK_RUN_DIR="+d.runDir)
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = d.cmd.Wait(); close(d.exited) }()
	cl := d.client()
	cl.Timeout = time.Second
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, _, err := cl.Version(context.Background()); err == nil {
			return d, nil
		}
		select {
		case <-d.exited:
			return nil, fmt.Errorf("daemon %s exited: %s", bin, d.out)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			d.stop()
			return nil, fmt.Errorf("daemon %s does not answer", bin)
		}
	}
}

func (d *testDaemon) client() *client.Client {
	cl, err := client.Dial(d.runDir)
	if err != nil {
		panic(err)
	}
	return cl
}

// syncBuf is a bytes.Buffer safe for the daemon's output copier and readers.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (d *procDaemon) lastLines() string {
	l := strings.Split(d.out.String(), "\n")
	if len(l) > 40 {
		l = l[len(l)-40:]
	}
	return strings.Join(l, "\n")
}

// stop kills the daemon (by pid) and removes its files.
func (d *procDaemon) stop() {
	select {
	case <-d.exited:
	default:
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
	os.RemoveAll(d.dir)
}

// requestLease asks for a lease held on this host as another host would
// (REQUEST with the next version, graceful), then has the daemon examine
// the resource at once instead of at its next renewal.
func requestLease(s *lease.Session, name string, off uint64) {
	requestAt(s.Client(), s.Lockspace(), leases, name, off)
}

func requestAt(cl *client.Client, ls, path, name string, off uint64) {
	res := &client.Resource{LockspaceName: ls, Name: name, Disks: []client.Disk{{Path: path, Offset: off}}}
	if err := cl.Request(context.Background(), res, client.RequestNextLVer, client.ReqGraceful); err != nil {
		panic(fmt.Sprintf("request %s: %v", name, err))
	}
	if err := cl.ExamineResource(context.Background(), &client.Resource{LockspaceName: ls, Name: name}); err != nil {
		panic(fmt.Sprintf("examine %s: %v", name, err))
	}
}
