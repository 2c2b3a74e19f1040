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
	"github.com/gosanlock/gosanlock/lease"
)

// The examples run against our daemon, started by TestMain with its own
// SANLOCK_RUN_DIR (so lease.Config{} finds it) and this lease file:
// lockspace "LS" at offset 0, resources R1, R2, R3 at 1, 2 and 3 MiB.
var leases string

// goSanlock is our sanlock binary, built by TestMain.
var goSanlock string

const realSanlock = "/usr/sbin/sanlock"

const mib = 1 << 20

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Println("lease tests need root (they run real daemons); skipped")
		return 0
	}
	tmp, err := os.MkdirTemp("/var/tmp", "leaseapi-bin-")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer os.RemoveAll(tmp)
	goSanlock = filepath.Join(tmp, "sanlock")
	if out, err := exec.Command("go", "build", "-o", goSanlock, "../cmd/sanlock").CombinedOutput(); err != nil {
		fmt.Printf("go build: %v\n%s", err, out)
		return 1
	}
	d, err := startDaemon(goSanlock)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer d.stop()
	leases = d.leases
	os.Setenv("SANLOCK_RUN_DIR", d.runDir)
	if err := d.join(1); err != nil {
		fmt.Println(err, d.output())
		return 1
	}
	rc := m.Run()
	if rc != 0 {
		fmt.Println(d.output())
	}
	return rc
}

// testDaemon is one daemon (ours or sanlock 3.8.5) with a private run
// directory and a lease file under /var/tmp.
type testDaemon struct {
	bin    string
	dir    string
	runDir string
	leases string
	cmd    *exec.Cmd
	out    *syncBuf
	exited chan struct{}
}

// startDaemon starts `bin daemon -D -w 0 -l 0 -U root -G root` and writes
// the lease file with bin's direct init (io_timeout 1).
func startDaemon(bin string) (*testDaemon, error) {
	dir, err := os.MkdirTemp("/var/tmp", "leaseapi-")
	if err != nil {
		return nil, err
	}
	d := &testDaemon{bin: bin, dir: dir, runDir: filepath.Join(dir, "run"),
		leases: filepath.Join(dir, "leases"), out: new(syncBuf), exited: make(chan struct{})}
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
		if _, _, err := cl.Version(); err == nil {
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

// join adds lockspace LS with hostID (io_timeout 1, passed explicitly:
// 3.8.5 ignores `daemon -o`).
func (d *testDaemon) join(hostID uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ls := &client.Lockspace{Name: "LS", HostID: hostID, Disk: client.Disk{Path: d.leases}}
	return d.client().AddLockspaceCtx(ctx, ls, 0, 1)
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

func (d *testDaemon) output() string {
	l := strings.Split(d.out.String(), "\n")
	if len(l) > 40 {
		l = l[len(l)-40:]
	}
	return strings.Join(l, "\n")
}

// stop kills the daemon (by pid) and removes its files.
func (d *testDaemon) stop() {
	select {
	case <-d.exited:
	default:
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
	os.RemoveAll(d.dir)
}

// daemonKinds are the daemons the behaviour tests run against.
func daemonKinds(t *testing.T) map[string]string {
	t.Helper()
	kinds := map[string]string{"go": goSanlock}
	if _, err := os.Stat(realSanlock); err == nil {
		kinds["c"] = realSanlock
	} else if os.Getenv("CI") != "" {
		t.Fatalf("%s missing in CI", realSanlock)
	}
	return kinds
}

// requestLease asks for a lease held on this host as another host would
// (REQUEST with the next version, graceful), then has the daemon examine
// the resource at once instead of at its next renewal.
func requestLease(s *lease.Session, name string, off uint64) {
	requestAt(s.Client(), s.Lockspace(), leases, name, off)
}

func requestAt(cl *client.Client, ls, path, name string, off uint64) {
	res := &client.Resource{LockspaceName: ls, Name: name, Disks: []client.Disk{{Path: path, Offset: off}}}
	if err := cl.Request(res, client.RequestNextLVer, client.ReqGraceful); err != nil {
		panic(fmt.Sprintf("request %s: %v", name, err))
	}
	if err := cl.ExamineResource(&client.Resource{LockspaceName: ls, Name: name}); err != nil {
		panic(fmt.Sprintf("examine %s: %v", name, err))
	}
}
