package realclients

// The environment for the libvirt tests: a private mount namespace (held
// open by a sleeping process) in which /etc/libvirt, /etc/passwd,
// /etc/group, /run, /var/lib, /var/log and /var/cache are bind mounts of
// directories under /var/tmp/libvirt-*, so libvirtd's configuration and
// state never touch the machine's. The sanlock daemon under test, libvirtd,
// virsh, QEMU and virt-sanlock-cleanup all run in that namespace; lease
// files and disk images live under /var/tmp (O_DIRECT works there), at
// the same paths inside and outside the namespace.

import (
	"bufio"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/internal/testenv"
)

// lvLockspace is the lockspace libvirt's sanlock plugin creates for its
// automatic disk leases.
const lvLockspace = "__LIBVIRT__DISKS__"

// lvWait is how long any single step may take before the test gives up;
// it bounds a hang, it is not a speed assertion.
const lvWait = 90 * time.Second

// lvBinaries are the programs the libvirt tests need; when running as root
// a missing one is a failure, not a skip.
var lvBinaries = []string{
	"/usr/sbin/libvirtd",
	"/usr/bin/virsh",
	"/usr/bin/qemu-system-x86_64",
	"/usr/sbin/virt-sanlock-cleanup",
	"/usr/lib/libvirt/libvirt_sanlock_helper",
	"/usr/lib/x86_64-linux-gnu/libvirt/lock-driver/sanlock.so",
	"/usr/lib/x86_64-linux-gnu/libvirt/connection-driver/libvirt_driver_qemu.so",
	"/usr/sbin/sanlock",
	"/usr/bin/nsenter",
	"/usr/bin/augtool",
}

// lvRequire skips when not root and fails when a needed program is missing.
func lvRequire(t *testing.T) {
	t.Helper()
	testenv.NeedRoot(t, "libvirtd, mount namespaces, QEMU; run `make realclients` as root")
	for _, b := range lvBinaries {
		if _, err := os.Stat(b); err != nil {
			t.Fatalf("%s is missing (install libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients libvirt-sanlock qemu-system-x86 sanlock augeas-tools): %v", b, err)
		}
	}
	if _, err := os.Stat("/etc/libvirt"); err != nil {
		t.Fatalf("/etc/libvirt is missing (libvirt-clients creates it); it is the mount point for the private configuration: %v", err)
	}
}

// ourSanlock returns our sanlock binary: $GOSANLOCK_TEST_SANLOCK when set
// (`make test` passes the bin/sanlock it has just built from this tree),
// else one built once from this worktree for the whole package.
func ourSanlock(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("GOSANLOCK_TEST_SANLOCK"); p != "" {
		return p
	}
	ourBin.once.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		dir, err := os.MkdirTemp("", "realclients-bin-")
		if err != nil {
			ourBin.err = err
			return
		}
		ourBin.dir = dir
		out := filepath.Join(dir, "sanlock")
		cmd := exec.Command(goBin, "build", "-o", out, "./cmd/sanlock")
		cmd.Dir = ".."
		if b, err := cmd.CombinedOutput(); err != nil {
			ourBin.err = fmt.Errorf("go build ./cmd/sanlock: %v\n%s", err, b)
			return
		}
		ourBin.path = out
	})
	if ourBin.err != nil {
		t.Fatal(ourBin.err)
	}
	return ourBin.path
}

// ourBin is the binary ourSanlock built (removed by TestMain).
var ourBin struct {
	once      sync.Once
	dir, path string
	err       error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if ourBin.dir != "" {
		_ = os.RemoveAll(ourBin.dir)
	}
	os.Exit(code)
}

// lvHostPaths are the machine's paths the tests must leave as found.
var lvHostPaths = []string{"/etc/libvirt", "/run/libvirt", "/var/lib/libvirt", "/var/log/libvirt", "/var/cache/libvirt"}

// lvSnapshot records, for each host path, whether it exists and the names
// it contains.
func lvSnapshot() map[string]string {
	m := map[string]string{}
	for _, p := range lvHostPaths {
		fi, err := os.Stat(p)
		if err != nil {
			m[p] = "absent"
			continue
		}
		if !fi.IsDir() {
			m[p] = fmt.Sprintf("file size %d", fi.Size())
			continue
		}
		ents, _ := os.ReadDir(p)
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		m[p] = "dir [" + strings.Join(names, " ") + "]"
	}
	return m
}

// lvEnv is one private libvirt + sanlock setup.
type lvEnv struct {
	t       *testing.T
	bin     string // sanlock binary of the daemon under test (also the CLI used)
	base    string // /var/tmp/libvirt-*
	runDir  string // SANLOCK_RUN_DIR
	leases  string // disk_lease_dir
	holder  *exec.Cmd
	holderW chan error // the holder's Wait result (one Wait only)
	daemon  *exec.Cmd
	daemonW chan error
	// A second daemon, host_id 2 in the plugin's lockspace, and a
	// `client command` holding a lease through it.
	runDir2  string
	daemon2  *exec.Cmd
	daemon2W chan error
	cmd2     *exec.Cmd
	cmd2W    chan error
	libvd    *exec.Cmd
	libvdW   chan error
	nLibvd   int
}

// lvNewEnv creates the directories and the namespace, and starts the sanlock
// daemon inside it. Everything is undone by t.Cleanup, also on failure.
func lvNewEnv(t *testing.T, bin string) *lvEnv {
	t.Helper()
	before := lvSnapshot()
	base, err := os.MkdirTemp("/var/tmp", "libvirt-")
	if err != nil {
		t.Fatal(err)
	}
	e := &lvEnv{t: t, bin: bin, base: base, runDir: filepath.Join(base, "slrun"), runDir2: filepath.Join(base, "slrun2"), leases: filepath.Join(base, "leases")}
	t.Cleanup(func() {
		e.teardown()
		if t.Failed() {
			e.dumpLogs()
		}
		e.keepLogs()
		if err := os.RemoveAll(base); err != nil {
			t.Errorf("remove %s: %v", base, err)
		}
		after := lvSnapshot()
		for _, p := range lvHostPaths {
			if before[p] != after[p] {
				t.Errorf("host path %s changed: before %s, after %s", p, before[p], after[p])
			}
		}
	})
	for _, d := range []string{"etc", "run", "varlib", "varlog", "varcache", "slrun", "slrun2", "leases", "disks"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e.writeConfig()
	e.startHolder()
	e.startDaemon()
	return e
}

func (e *lvEnv) path(p ...string) string { return filepath.Join(append([]string{e.base}, p...)...) }

func (e *lvEnv) writeFile(name, content string) {
	e.t.Helper()
	if err := os.WriteFile(e.path(name), []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *lvEnv) writeConfig() {
	e.writeFile("etc/libvirtd.conf", `listen_tls = 0
listen_tcp = 0
auth_unix_ro = "none"
auth_unix_rw = "none"
log_filters = "1:locking 3:*"
log_outputs = "1:file:/var/log/libvirt/libvirtd.log"
`)
	// No security driver, cgroups or per-guest /dev namespace (none of
	// them is about leases, and a container has not all of them); logs
	// to files so no virtlogd is needed.
	e.writeFile("etc/qemu.conf", `lock_manager = "sanlock"
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
namespaces = []
cgroup_controllers = []
stdio_handler = "file"
`)
	e.writeFile("etc/qemu-sanlock.conf", fmt.Sprintf(`auto_disk_leases = 1
disk_lease_dir = %q
host_id = 1
require_lease_for_disks = 1
io_timeout = 1
user = "root"
group = "root"
`, e.leases))
	// libvirt's QEMU driver resolves its built-in default user
	// libvirt-qemu before reading qemu.conf; private copies of passwd and
	// group give it one without touching the machine's.
	for _, f := range []struct{ name, add string }{
		{"passwd", "libvirt-qemu:x:64055:64055:Libvirt Qemu:/var/lib/libvirt:/usr/sbin/nologin\n"},
		{"group", "libvirt-qemu:x:64055:\nkvm:x:64056:\nlibvirt:x:64057:\n"},
	} {
		b, err := os.ReadFile("/etc/" + f.name)
		if err != nil {
			e.t.Fatal(err)
		}
		s := string(b)
		if !strings.HasSuffix(s, "\n") {
			s += "\n"
		}
		for _, line := range strings.SplitAfter(f.add, "\n") {
			if line == "" {
				continue
			}
			name := line[:strings.IndexByte(line, ':')+1]
			if !strings.HasPrefix(s, name) && !strings.Contains(s, "\n"+name) {
				s += line
			}
		}
		e.writeFile(f.name, s)
	}
}

// startHolder starts the process whose mount namespace everything else
// enters: a shell that makes the bind mounts and then sleeps.
func (e *lvEnv) startHolder() {
	e.t.Helper()
	b := e.base
	script := strings.Join([]string{
		"set -e",
		"mount --make-rprivate /",
		"mount --bind " + b + "/etc /etc/libvirt",
		"mount --bind " + b + "/passwd /etc/passwd",
		"mount --bind " + b + "/group /etc/group",
		"mount --bind " + b + "/run /run",
		"mount --bind " + b + "/varlib /var/lib",
		"mount --bind " + b + "/varlog /var/log",
		"mount --bind " + b + "/varcache /var/cache",
		"mkdir -p /run/libvirt /var/lib/libvirt /var/log/libvirt /var/cache/libvirt",
		"touch " + b + "/ns-ready",
		"exec sleep infinity",
	}, "\n")
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Setsid: true}
	out, err := os.Create(e.path("holder.out"))
	if err != nil {
		e.t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		e.t.Fatalf("start namespace holder: %v", err)
	}
	e.holder = cmd
	done := make(chan error, 1)
	e.holderW = done
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(lvWait)
	for {
		if _, err := os.Stat(e.path("ns-ready")); err == nil {
			return
		}
		select {
		case err := <-done:
			b, _ := os.ReadFile(e.path("holder.out"))
			e.holder = nil
			e.t.Fatalf("namespace holder exited: %v\n%s", err, b)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			e.t.Fatal("namespace holder not ready")
		}
	}
}

// nsCmd returns a command that runs argv inside the private namespace.
// nsenter execs argv, so the command's pid is argv's pid.
func (e *lvEnv) nsCmd(argv ...string) *exec.Cmd { return e.nsCmdIn(e.runDir, argv...) }

// nsCmdIn is nsCmd talking to the daemon whose run directory is runDir.
func (e *lvEnv) nsCmdIn(runDir string, argv ...string) *exec.Cmd {
	args := append([]string{"-t", strconv.Itoa(e.holder.Process.Pid), "-m", "--"}, argv...)
	cmd := exec.Command("/usr/bin/nsenter", args...)
	cmd.Env = append(os.Environ(),
		"SANLOCK_RUN_DIR="+runDir,
		"SANLOCK_PRIVILEGED=0",
		"PATH="+filepath.Dir(e.bin)+":/usr/sbin:/usr/bin:/sbin:/bin",
		"LC_ALL=C")
	return cmd
}

// startBg starts argv in the namespace with output to base/logName.
func (e *lvEnv) startBg(logName string, argv ...string) (*exec.Cmd, chan error) {
	e.t.Helper()
	return e.startBgIn(e.runDir, logName, argv...)
}

func (e *lvEnv) startBgIn(runDir, logName string, argv ...string) (*exec.Cmd, chan error) {
	e.t.Helper()
	cmd := e.nsCmdIn(runDir, argv...)
	f, err := os.OpenFile(e.path(logName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		e.t.Fatal(err)
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		e.t.Fatalf("start %v: %v", argv, err)
	}
	ch := make(chan error, 1)
	go func() { ch <- cmd.Wait() }()
	return cmd, ch
}

// startDaemon starts the sanlock daemon under test in the namespace (so
// the killpath program it runs reaches the private libvirtd).
func (e *lvEnv) startDaemon() {
	e.t.Helper()
	e.daemon, e.daemonW = e.startBg("sanlock.log", e.bin, "daemon", "-D", "-w", "0", "-l", "0", "-U", "root", "-G", "root")
	e.waitFor("sanlock daemon answers", func() (bool, string) {
		select {
		case err := <-e.daemonW:
			e.daemonW <- err
			b, _ := os.ReadFile(e.path("sanlock.log"))
			e.t.Fatalf("sanlock daemon exited: %v\n%s", err, b)
		default:
		}
		out, err := e.sanlock("client", "status")
		return err == nil, out
	})
}

// startLibvirtd starts libvirtd in the namespace and waits until virsh
// reaches it and the plugin's lockspace is joined.
func (e *lvEnv) startLibvirtd() {
	e.t.Helper()
	e.nLibvd++
	e.libvd, e.libvdW = e.startBg("libvirtd.out", "/usr/sbin/libvirtd")
	e.waitFor("libvirtd answers and lockspace "+lvLockspace+" is joined", func() (bool, string) {
		select {
		case err := <-e.libvdW:
			e.libvdW <- err
			e.t.Fatalf("libvirtd exited: %v\n%s", err, e.tail("varlog/libvirt/libvirtd.log", 30))
		default:
		}
		if out, err := e.virsh("version"); err != nil {
			return false, out
		}
		st := e.status()
		return st.hasSpace(lvLockspace), st.raw
	})
}

// stopLibvirtd stops libvirtd with SIGTERM and waits for it to exit.
func (e *lvEnv) stopLibvirtd() {
	e.t.Helper()
	if e.libvd == nil {
		return
	}
	_ = e.libvd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.libvdW:
	case <-time.After(lvWait):
		_ = e.libvd.Process.Kill()
		<-e.libvdW
		e.t.Errorf("libvirtd did not stop on SIGTERM")
	}
	e.libvd = nil
}

// startDaemon2 starts a second daemon (another "host" sharing the lease
// files) in the namespace.
func (e *lvEnv) startDaemon2() {
	e.t.Helper()
	e.daemon2, e.daemon2W = e.startBgIn(e.runDir2, "sanlock2.log", e.bin, "daemon", "-D", "-w", "0", "-l", "0", "-U", "root", "-G", "root")
	e.waitFor("second sanlock daemon answers", func() (bool, string) {
		select {
		case err := <-e.daemon2W:
			e.daemon2W <- err
			e.t.Fatalf("second sanlock daemon exited: %v\n%s", err, e.tail("sanlock2.log", 30))
		default:
		}
		out, err := e.sanlock2("client", "status")
		return err == nil, out
	})
}

func (e *lvEnv) sanlock2(args ...string) (string, error) {
	b, err := e.nsCmdIn(e.runDir2, append([]string{e.bin}, args...)...).CombinedOutput()
	return string(b), err
}

// stopDaemon2 ends the `client command` holder and the second daemon.
func (e *lvEnv) stopDaemon2() {
	if e.cmd2 != nil {
		_ = e.cmd2.Process.Kill()
		<-e.cmd2W
		e.cmd2 = nil
	}
	if e.daemon2 != nil {
		_, _ = e.sanlock2("client", "shutdown", "-f", "1")
		select {
		case <-e.daemon2W:
		case <-time.After(10 * time.Second):
			_ = e.daemon2.Process.Kill()
			<-e.daemon2W
		}
		e.daemon2 = nil
	}
}

// teardown stops, by pid, every process the test started: QEMU guests,
// libvirtd, the sanlock daemons, the namespace holder.
func (e *lvEnv) teardown() {
	e.stopDaemon2()
	for _, pid := range e.qemuPids() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if e.libvd != nil {
		_ = e.libvd.Process.Signal(syscall.SIGTERM)
		select {
		case <-e.libvdW:
		case <-time.After(20 * time.Second):
			_ = e.libvd.Process.Kill()
			<-e.libvdW
		}
		e.libvd = nil
	}
	if e.daemon != nil {
		_, _ = e.sanlock("client", "shutdown", "-f", "1")
		select {
		case <-e.daemonW:
		case <-time.After(10 * time.Second):
			_ = e.daemon.Process.Kill()
			<-e.daemonW
		}
		e.daemon = nil
	}
	// QEMU processes that were still starting when the pid scan ran.
	for _, pid := range e.qemuPids() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if e.holder != nil {
		_ = e.holder.Process.Kill()
		select {
		case <-e.holderW:
		case <-time.After(10 * time.Second):
		}
		e.holder = nil
	}
}

// qemuPids finds the QEMU processes of this environment: their command
// line names a disk image under e.base.
func (e *lvEnv) qemuPids() []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 0 && strings.HasSuffix(args[0], "qemu-system-x86_64") && strings.Contains(string(b), e.base+"/") {
			pids = append(pids, pid)
		}
	}
	return pids
}

func (e *lvEnv) tail(name string, n int) string {
	b, _ := os.ReadFile(e.path(name))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// keepLogs copies the daemon and libvirtd logs to $LV_KEEP_LOGS/<test
// name>/ when that variable is set (for comparing the two daemons).
func (e *lvEnv) keepLogs() {
	dir := os.Getenv("LV_KEEP_LOGS")
	if dir == "" {
		return
	}
	dst := filepath.Join(dir, strings.ReplaceAll(e.t.Name(), "/", "_"))
	if err := os.MkdirAll(dst, 0o755); err != nil {
		e.t.Logf("keep logs: %v", err)
		return
	}
	for _, f := range []string{"sanlock.log", "sanlock2.log", "libvirtd.out", "varlog/libvirt/libvirtd.log", "status-D.txt"} {
		if b, err := os.ReadFile(e.path(f)); err == nil {
			_ = os.WriteFile(filepath.Join(dst, filepath.Base(f)), b, 0o644)
		}
	}
}

func (e *lvEnv) dumpLogs() {
	e.t.Logf("sanlock daemon log (tail):\n%s", e.tail("sanlock.log", 60))
	e.t.Logf("libvirtd log (tail):\n%s", e.tail("varlog/libvirt/libvirtd.log", 40))
}

// run runs argv in the namespace and returns its combined output.
func (e *lvEnv) run(argv ...string) (string, error) {
	cmd := e.nsCmd(argv...)
	b, err := cmd.CombinedOutput()
	return string(b), err
}

func (e *lvEnv) sanlock(args ...string) (string, error) {
	return e.run(append([]string{e.bin}, args...)...)
}

func (e *lvEnv) virsh(args ...string) (string, error) {
	return e.run(append([]string{"/usr/bin/virsh", "-q", "-c", "qemu:///system"}, args...)...)
}

// virshOK runs virsh and fails the test when it fails.
func (e *lvEnv) virshOK(args ...string) string {
	e.t.Helper()
	out, err := e.virsh(args...)
	if err != nil {
		e.t.Fatalf("virsh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// waitFor polls cond until it holds; the last detail is shown on timeout.
func (e *lvEnv) waitFor(what string, cond func() (bool, string)) {
	e.t.Helper()
	deadline := time.Now().Add(lvWait)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s; last:\n%s", what, detail)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// lvHeld is one `r` line of `sanlock client status`.
type lvHeld struct {
	res  string // lockspace:resource:path:offset
	lver string // lease version, or SH for a shared lease
	pid  int
}

// lvStatus is parsed `sanlock client status` output.
type lvStatus struct {
	raw     string
	spaces  []string       // lockspace:host_id:path:offset
	clients map[int]string // pid -> name (pid > 0 only)
	held    []lvHeld
}

func lvParseStatus(out string) lvStatus {
	st := lvStatus{raw: out, clients: map[int]string{}}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "s":
			if len(f) >= 2 {
				st.spaces = append(st.spaces, f[1])
			}
		case "p":
			if len(f) >= 2 {
				if pid, err := strconv.Atoi(f[1]); err == nil && pid > 0 {
					name := ""
					if len(f) >= 3 {
						name = f[2]
					}
					st.clients[pid] = name
				}
			}
		case "r":
			if len(f) >= 4 && f[2] == "p" {
				i := strings.LastIndexByte(f[1], ':')
				pid, _ := strconv.Atoi(f[3])
				if i > 0 {
					st.held = append(st.held, lvHeld{res: f[1][:i], lver: f[1][i+1:], pid: pid})
				}
			}
		}
	}
	return st
}

func (st lvStatus) hasSpace(name string) bool {
	for _, s := range st.spaces {
		if strings.HasPrefix(s, name+":") {
			return true
		}
	}
	return false
}

// holders returns the held entries for resource res.
func (st lvStatus) holders(res string) []lvHeld {
	var hs []lvHeld
	for _, h := range st.held {
		if h.res == res {
			hs = append(hs, h)
		}
	}
	return hs
}

// byPid returns the resources held by pid.
func (st lvStatus) byPid(pid int) []lvHeld {
	var hs []lvHeld
	for _, h := range st.held {
		if h.pid == pid {
			hs = append(hs, h)
		}
	}
	return hs
}

func (e *lvEnv) status() lvStatus {
	e.t.Helper()
	out, err := e.sanlock("client", "status")
	if err != nil {
		e.t.Fatalf("sanlock client status: %v\n%s", err, out)
	}
	return lvParseStatus(out)
}

// statusD returns the `client status -D` block of the client with pid.
func (e *lvEnv) statusD(pid int) map[string]string {
	e.t.Helper()
	out, err := e.sanlock("client", "status", "-D")
	if err != nil {
		e.t.Fatalf("sanlock client status -D: %v\n%s", err, out)
	}
	m := map[string]string{}
	in := false
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, " ") {
			f := strings.Fields(line)
			in = len(f) >= 2 && f[0] == "p" && f[1] == strconv.Itoa(pid)
			continue
		}
		if in {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
				m[k] = v
			}
		}
	}
	return m
}

// snapshotD appends `client status -D` to base/status-D.txt (kept with
// the logs, for comparing the daemons).
func (e *lvEnv) snapshotD(label string) {
	out, _ := e.sanlock("client", "status", "-D")
	f, err := os.OpenFile(e.path("status-D.txt"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "=== %s\n%s\n", label, out)
}

// leader reads the lease leader of res with `direct read_leader`.
func (e *lvEnv) leader(res string) map[string]string {
	e.t.Helper()
	out, err := e.sanlock("direct", "read_leader", "-r", res)
	if err != nil {
		e.t.Fatalf("direct read_leader %s: %v\n%s", res, err, out)
	}
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

// lvGuest describes a small QEMU guest without an OS.
type lvGuest struct {
	name        string
	disks       []string // image file names under base/disks
	shareable   bool     // mark the disks <shareable/>
	lease       string   // an explicit <lease> key in lvLockspace, file under leases/
	lockFailure string   // <on_lockfailure> action, which makes libvirt register a killpath
}

func (e *lvEnv) disk(name string) string { return e.path("disks", name) }

// diskRes is the automatic lease libvirt uses for the disk image name:
// the MD5 of the image path names the lease and its file.
func (e *lvEnv) diskRes(name string) string {
	sum := md5.Sum([]byte(e.disk(name)))
	key := hex.EncodeToString(sum[:])
	return lvLockspace + ":" + key + ":" + filepath.Join(e.leases, key) + ":0"
}

func (e *lvEnv) leaseRes(key string) string {
	return lvLockspace + ":" + key + ":" + filepath.Join(e.leases, key) + ":0"
}

// makeDisk creates a 1 MiB raw image.
func (e *lvEnv) makeDisk(name string) {
	e.t.Helper()
	f, err := os.Create(e.disk(name))
	if err != nil {
		e.t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(1 << 20); err != nil {
		e.t.Fatal(err)
	}
}

// makeLease creates and initialises an explicit lease file for key.
func (e *lvEnv) makeLease(key string) {
	e.t.Helper()
	f, err := os.Create(filepath.Join(e.leases, key))
	if err != nil {
		e.t.Fatal(err)
	}
	err = f.Truncate(1 << 20)
	f.Close()
	if err != nil {
		e.t.Fatal(err)
	}
	if out, err := e.sanlock("direct", "init", "-r", e.leaseRes(key)); err != nil {
		e.t.Fatalf("direct init -r: %v\n%s", err, out)
	}
}

func (e *lvEnv) guestXML(g lvGuest) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<domain type='qemu'>\n  <name>%s</name>\n  <memory unit='MiB'>64</memory>\n  <vcpu>1</vcpu>\n", g.name)
	b.WriteString("  <os><type arch='x86_64' machine='pc'>hvm</type></os>\n  <features><acpi/></features>\n")
	b.WriteString("  <on_poweroff>destroy</on_poweroff>\n  <on_reboot>restart</on_reboot>\n  <on_crash>destroy</on_crash>\n")
	if g.lockFailure != "" {
		fmt.Fprintf(&b, "  <on_lockfailure>%s</on_lockfailure>\n", g.lockFailure)
	}
	b.WriteString("  <devices>\n    <emulator>/usr/bin/qemu-system-x86_64</emulator>\n")
	for i, d := range g.disks {
		fmt.Fprintf(&b, "    <disk type='file' device='disk'>\n      <driver name='qemu' type='raw' cache='none'/>\n      <source file='%s'/>\n      <target dev='vd%c' bus='virtio'/>\n", e.disk(d), 'a'+i)
		if g.shareable {
			b.WriteString("      <shareable/>\n")
		}
		b.WriteString("    </disk>\n")
	}
	if g.lease != "" {
		fmt.Fprintf(&b, "    <lease>\n      <lockspace>%s</lockspace>\n      <key>%s</key>\n      <target path='%s' offset='0'/>\n    </lease>\n", lvLockspace, g.lease, filepath.Join(e.leases, g.lease))
	}
	b.WriteString("    <memballoon model='none'/>\n  </devices>\n</domain>\n")
	return b.String()
}

// create starts g as a transient domain.
func (e *lvEnv) create(g lvGuest) (string, error) {
	e.t.Helper()
	p := e.path(g.name + ".xml")
	e.writeFile(g.name+".xml", e.guestXML(g))
	return e.virsh("create", p)
}

// createOK starts g and returns its QEMU pid.
func (e *lvEnv) createOK(g lvGuest) int {
	e.t.Helper()
	if out, err := e.create(g); err != nil {
		e.t.Fatalf("virsh create %s: %v\n%s", g.name, err, out)
	}
	return e.pid(g.name)
}

// pid reads the QEMU pid libvirt recorded for a running guest.
func (e *lvEnv) pid(name string) int {
	e.t.Helper()
	b, err := os.ReadFile(e.path("run", "libvirt", "qemu", name+".pid"))
	if err != nil {
		e.t.Fatalf("pid of guest %s: %v", name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		e.t.Fatalf("pid of guest %s: %v", name, err)
	}
	return pid
}

// lvAlive reports whether pid exists and is not a zombie.
func lvAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func (e *lvEnv) domState(name string) string {
	out, err := e.virsh("domstate", "--reason", name)
	if err != nil {
		return "error: " + strings.TrimSpace(out)
	}
	return strings.TrimSpace(out)
}
