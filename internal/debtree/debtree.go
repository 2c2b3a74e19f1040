// Package debtree runs the newer sanlock releases beside ours in tests.
//
// scripts/debian-trees.sh builds (once, then cached) two Debian root
// trees: trixie with sanlock 3.9.5 and sid with sanlock 5.1.1 (and
// lvm2-lockd); each also has libsanlock-dev, gcc and strace
// (docs/testing.md "Newer sanlock releases"). This package finds or
// builds them ([Get]) and runs programs inside them ([Tree.Command]):
// their sanlock daemons ([Tree.StartDaemon]), their `sanlock client`
// tool, and small C programs compiled in the tree against its own
// libsanlock ([Tree.CompileC], [Tree.RunC]).
//
// Every program runs in a mount namespace of its own, rooted at the tree
// (chroot), so nothing it mounts is seen by the host and nothing is left
// mounted when it ends. Inside:
//
//   - /proc and /sys are the host's; /dev is a small tmpfs holding the
//     host's null, zero, full, random, urandom and tty, /dev/pts and an
//     empty /dev/shm (so that extra bind mounts, such as a fake watchdog
//     device over /dev/watchdog, never create files in the host's /dev);
//   - /var/tmp is the host's /var/tmp (with the mounts below it), so
//     a lease file made by a test under /var/tmp has the same path for
//     the host daemons (3.8.5, ours) and the tree's; lease files must be
//     there, not on tmpfs (O_DIRECT);
//   - /run is a host directory chosen by the caller ([Options.RunDir]),
//     so each daemon, and each wdmd (whose socket path is fixed at
//     /run/wdmd), has its own /run and the host test reaches the sockets
//     in it.
//
// The C driver testdata/sanlk_newer.c makes the calls only 5.1.1's
// libsanlock has (acquire2, read/init_lockspace_host, set_host) and the
// old calls with their new flags, one call per line, printing one
// parseable line per call ([Tree.NewerDriver], [Tree.StartDriver],
// [Tree.CallOnce], [ParseResult]); it needs the sid tree. It is C on
// purpose: the real library's encoding of each call is what the tests
// compare our daemon with (docs/protocol.md "Commands of 3.9.5 and
// 5.1.1"). [Tree.Trace] runs a program under the tree's strace and
// returns what it sent to the daemon. daemon/newerinterop drives the
// driver against the real 5.1.1 daemon.
//
// Only test code imports this package: tests, and testdisk/harness, whose
// hosts of kinds c395 and c511 run the trees' daemons. It needs root;
// [Get] skips the test when it runs as another user or the trees cannot
// be built, except with CI=true, where either is a failure; [Find] only
// looks for a built tree.
package debtree

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gosanlock/gosanlock/internal/testenv"
)

// DefaultDir is where scripts/debian-trees.sh builds the trees when
// $GOSANLOCK_TREES is not set.
const DefaultDir = "/var/cache/gosanlock/trees"

// Tree is one built Debian root tree.
type Tree struct {
	// Name is "trixie" or "sid".
	Name string
	// Root is the tree's directory on the host.
	Root string
	// Version is what `sanlock version` prints in the tree, e.g. "3.9.5".
	Version string
}

var build struct {
	once sync.Once
	out  []byte
	err  error
}

// unavailable skips the test, or fails it under CI=true.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	testenv.Missing(t, "debtree: "+format, args...)
}

// moduleRoot is the directory of go.mod above the working directory
// (go test runs in the package's directory).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = up
	}
}

// treesDir is where the trees are: $GOSANLOCK_TREES, else DefaultDir.
func treesDir() string {
	if d := os.Getenv("GOSANLOCK_TREES"); d != "" {
		return d
	}
	return DefaultDir
}

// Get returns the tree name ("trixie" or "sid"), running
// scripts/debian-trees.sh first (once per test binary; it returns at once
// when the trees are built, and takes a few minutes the first time).
func Get(t testing.TB, name string) *Tree {
	t.Helper()
	if os.Geteuid() != 0 {
		unavailable(t, "needs root to build and enter the trees")
	}
	if name != "trixie" && name != "sid" {
		t.Fatalf("debtree: unknown tree %q", name)
	}
	dir := treesDir()
	build.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			build.err = err
			return
		}
		cmd := exec.Command(filepath.Join(root, "scripts", "debian-trees.sh"), dir)
		build.out, build.err = cmd.CombinedOutput()
	})
	if build.err != nil {
		unavailable(t, "scripts/debian-trees.sh: %v\n%s", build.err, build.out)
	}
	tr, err := Find(name)
	if err != nil {
		unavailable(t, "%v", err)
	}
	return tr
}

// Find returns the tree name ("trixie" or "sid") if it is built, without
// building it (for programs that are not tests, such as the harness's
// soak runner; tests use Get). It needs root, as every use of a tree
// does.
func Find(name string) (*Tree, error) {
	if name != "trixie" && name != "sid" {
		return nil, fmt.Errorf("debtree: unknown tree %q", name)
	}
	tr := &Tree{Name: name, Root: filepath.Join(treesDir(), name)}
	if _, err := os.Stat(filepath.Join(tr.Root, ".gosanlock-ready")); err != nil {
		return nil, fmt.Errorf("tree %s not ready: %v", name, err)
	}
	out, err := tr.Command(nil, "sanlock", "version").Output()
	if err != nil {
		return nil, fmt.Errorf("sanlock version in %s: %v", name, err)
	}
	// "sanlock 3.9.5 (built ...)" or just the number.
	for _, f := range strings.Fields(string(out)) {
		if len(f) > 0 && f[0] >= '0' && f[0] <= '9' {
			tr.Version = f
			break
		}
	}
	if tr.Version == "" {
		return nil, fmt.Errorf("sanlock version in %s printed %q", name, out)
	}
	return tr, nil
}

// Bind is an extra bind mount: the host path Host at the tree path Tree.
// The target is created in the tree (an empty file or directory, like
// Host) when missing.
type Bind struct {
	Host, Tree string
}

// Options says how Command runs a program. The zero value (or nil) runs
// it with the tree's own /run and no extra environment.
type Options struct {
	// RunDir, when set, is the host directory mounted at the tree's /run.
	RunDir string
	// Binds are mounted after the standard ones, in order.
	Binds []Bind
	// Env is added to the program's environment, which otherwise holds
	// only PATH, HOME=/root and LANG=C.
	Env []string
	// Dir is the working directory inside the tree ("/" when empty).
	Dir string
}

// q quotes s for the shell.
func q(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Command returns a command that runs args in the tree, in a new mount
// namespace (see the package comment for what is mounted there). The
// process started is the program itself (the wrapper shell and chroot
// exec it), so cmd.Process.Pid is the program's pid.
func (tr *Tree) Command(opts *Options, args ...string) *exec.Cmd {
	if opts == nil {
		opts = &Options{}
	}
	r := q(tr.Root)
	var s strings.Builder
	s.WriteString("set -e\n")
	fmt.Fprintf(&s, "mount --bind /proc %s/proc\n", r)
	fmt.Fprintf(&s, "mount --bind /sys %s/sys\n", r)
	fmt.Fprintf(&s, "mount -t tmpfs -o mode=755,nosuid gosanlock-dev %s/dev\n", r)
	for _, d := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		fmt.Fprintf(&s, "touch %s/dev/%s && mount --bind /dev/%s %s/dev/%s\n", r, d, d, r, d)
	}
	fmt.Fprintf(&s, "mkdir %s/dev/pts %s/dev/shm && mount --bind /dev/pts %s/dev/pts\n", r, r, r)
	fmt.Fprintf(&s, "ln -s /proc/self/fd %s/dev/fd; ln -s pts/ptmx %s/dev/ptmx\n", r, r)
	fmt.Fprintf(&s, "ln -s /proc/self/fd/0 %s/dev/stdin; ln -s /proc/self/fd/1 %s/dev/stdout; ln -s /proc/self/fd/2 %s/dev/stderr\n", r, r, r)
	// Recursive: lease files may sit on mounts below /var/tmp (FUSE
	// fault layers, loop devices).
	fmt.Fprintf(&s, "mount --rbind /var/tmp %s/var/tmp\n", r)
	if opts.RunDir != "" {
		fmt.Fprintf(&s, "mount --bind %s %s/run\n", q(opts.RunDir), r)
	}
	for _, b := range opts.Binds {
		dst := r + "/" + q(strings.TrimPrefix(b.Tree, "/"))
		fmt.Fprintf(&s, "if [ ! -e %s ]; then if [ -d %s ]; then mkdir -p %s; else mkdir -p \"$(dirname %s)\"; touch %s; fi; fi\n",
			dst, q(b.Host), dst, dst, dst)
		fmt.Fprintf(&s, "mount --bind %s %s\n", q(b.Host), dst)
	}
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C"}
	env = append(env, opts.Env...)
	fmt.Fprintf(&s, "exec chroot %s /usr/bin/env -i", r)
	if opts.Dir != "" {
		fmt.Fprintf(&s, " -C %s", q(opts.Dir))
	}
	for _, e := range env {
		s.WriteString(" " + q(e))
	}
	s.WriteString(` "$@"` + "\n")

	cmd := exec.Command("/bin/sh", append([]string{"-c", s.String(), "debtree"}, args...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C"}
	// Go makes the new namespace's mounts private (MS_REC|MS_PRIVATE on
	// /) before the exec, so nothing propagates back to the host.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	return cmd
}

// RunDir returns a new empty host directory for Options.RunDir (under
// /tmp, short enough for socket paths), removed at cleanup.
func RunDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Daemon is a sanlock daemon of a tree, started by StartDaemon.
type Daemon struct {
	Tree *Tree
	// RunDir is the host directory mounted at the daemon's /run.
	RunDir string
	cmd    *exec.Cmd
	log    *bytes.Buffer
	done   chan struct{}
	mu     sync.Mutex
}

// DaemonRunDir is the daemon's SANLOCK_RUN_DIR inside the tree.
const DaemonRunDir = "/run/sanlock"

// StartDaemon starts `sanlock daemon -D -w 0 -l 0 -U root -G root` with
// args added, in the tree with runDir (a host directory; "" = a new one
// from RunDir) at its /run, SANLOCK_RUN_DIR=/run/sanlock and
// SANLOCK_PRIVILEGED=0. It returns once the daemon answers on its socket;
// at cleanup the daemon is sent SIGTERM, then SIGKILL after 5 s, by pid.
func (tr *Tree) StartDaemon(t testing.TB, runDir string, args ...string) *Daemon {
	t.Helper()
	if runDir == "" {
		runDir = RunDir(t)
	}
	if err := os.MkdirAll(filepath.Join(runDir, "sanlock"), 0o755); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{Tree: tr, RunDir: runDir, log: &bytes.Buffer{}, done: make(chan struct{})}
	argv := append([]string{"sanlock", "daemon", "-D", "-w", "0", "-l", "0", "-U", "root", "-G", "root"}, args...)
	d.cmd = tr.Command(&Options{
		RunDir: runDir,
		Env:    []string{"SANLOCK_RUN_DIR=" + DaemonRunDir, "SANLOCK_PRIVILEGED=0"},
	}, argv...)
	d.cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	d.cmd.Stdout = (*lockedWriter)(d)
	d.cmd.Stderr = (*lockedWriter)(d)
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("debtree: start %s daemon: %v", tr.Name, err)
	}
	go func() {
		_ = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() { d.stop(t) })
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("unix", d.SocketPath())
		if err == nil {
			c.Close()
			return d
		}
		select {
		case <-d.done:
			t.Fatalf("debtree: %s daemon exited: %v\n%s", tr.Name, d.cmd.ProcessState, d.Log())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("debtree: %s daemon: no socket after 20 s: %v\n%s", tr.Name, err, d.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type lockedWriter Daemon

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.log.Write(p)
}

// Log returns what the daemon printed so far (with -D: its log lines).
func (d *Daemon) Log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.String()
}

// Pid is the daemon's pid (on the host).
func (d *Daemon) Pid() int { return d.cmd.Process.Pid }

// SocketPath is the daemon's socket as the host sees it.
func (d *Daemon) SocketPath() string {
	return filepath.Join(d.RunDir, "sanlock", "sanlock.sock")
}

// HostRunDir is the daemon's SANLOCK_RUN_DIR as the host sees it (what
// client.Dial takes).
func (d *Daemon) HostRunDir() string { return filepath.Join(d.RunDir, "sanlock") }

func (d *Daemon) stop(t testing.TB) {
	select {
	case <-d.done:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
		return
	case <-time.After(2 * time.Second):
	}
	_ = d.cmd.Process.Kill()
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		t.Errorf("debtree: %s daemon pid %d survived SIGKILL", d.Tree.Name, d.Pid())
	}
}

// Client runs `sanlock client ARGS` (or any other sanlock action: args[0]
// is the action) in the tree against this daemon and returns its output
// (stdout and stderr) and error.
func (d *Daemon) Client(t testing.TB, args ...string) (string, error) {
	t.Helper()
	cmd := d.Tree.Command(&Options{RunDir: d.RunDir, Env: []string{"SANLOCK_RUN_DIR=" + DaemonRunDir}},
		append([]string{"sanlock"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// ccSeq numbers CompileC's temporary files within this process.
var ccSeq atomic.Int64

// ccDir is where CompileC keeps its sources and programs, inside the tree.
const ccDir = "/opt/gosanlock"

// CompileC compiles the C program src (one file) with gcc in the tree
// against the tree's libsanlock (-lsanlock) and returns its path inside
// the tree. Programs are kept under /opt/gosanlock in the tree, named by
// name and a hash of the source, so the same source compiles once.
func (tr *Tree) CompileC(t testing.TB, name, src string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(src))
	base := name + "-" + hex.EncodeToString(sum[:8])
	bin := ccDir + "/bin/" + base
	if _, err := os.Stat(filepath.Join(tr.Root, bin)); err == nil {
		return bin
	}
	for _, d := range []string{"src", "bin"} {
		if err := os.MkdirAll(filepath.Join(tr.Root, ccDir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	srcPath := ccDir + "/src/" + base + ".c"
	if err := os.WriteFile(filepath.Join(tr.Root, srcPath), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	// Built under a temporary name and renamed: two test binaries may
	// compile the same program at once.
	tmp := fmt.Sprintf("%s.%d.%d.tmp", bin, os.Getpid(), ccSeq.Add(1))
	out, err := tr.Command(nil, "gcc", "-O1", "-Wall", "-o", tmp, srcPath, "-lsanlock").CombinedOutput()
	if err != nil {
		t.Fatalf("debtree: gcc %s in %s: %v\n%s", name, tr.Name, err, out)
	}
	if err := os.Rename(filepath.Join(tr.Root, tmp), filepath.Join(tr.Root, bin)); err != nil {
		t.Fatal(err)
	}
	return bin
}

// RunC runs args (args[0] a program in the tree, e.g. from CompileC) with
// runDir at the tree's /run and SANLOCK_RUN_DIR=/run/sanlock, so that it
// talks to the daemon StartDaemon started with the same runDir. It returns
// the program's stdout; a failed run's error includes its stderr.
func (tr *Tree) RunC(t testing.TB, runDir string, args ...string) (string, error) {
	t.Helper()
	cmd := tr.Command(&Options{RunDir: runDir, Env: []string{"SANLOCK_RUN_DIR=" + DaemonRunDir}}, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

//go:embed testdata/sanlk_newer.c
var newerSrc string

// NewerDriver compiles testdata/sanlk_newer.c in the tree (sid: its
// libsanlock has the 5.1.1 calls) and returns the program's path in the
// tree. The program makes one libsanlock call per line of input (or the
// one on its command line) and prints one line per call: the call's name,
// rv=N and the returned fields as key=value words; its comment lists the
// calls and their arguments.
func (tr *Tree) NewerDriver(t testing.TB) string {
	t.Helper()
	return tr.CompileC(t, "sanlk_newer", newerSrc)
}
