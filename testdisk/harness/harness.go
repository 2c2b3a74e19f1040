// Package harness runs real sanlock daemons — the C sanlock 3.8.5 of the
// machine, ours, and the C sanlock 3.9.5 and 5.1.1 of the Debian trees of
// internal/debtree — as emulated hosts of one cluster on one machine, for
// tests and soak runs.
//
// A Cluster owns a work directory under /var/tmp. Its backing directory
// holds the lease files. Every Host gets
//
//   - its own view of the backing directory: a fusefault mount, so the test
//     can fail, hang or slow down that host's storage alone (SetFault);
//   - its own run directory (SANLOCK_RUN_DIR), so daemons do not see each
//     other's sockets or lockfiles;
//   - its own process group: the daemon leads it and every client process
//     started with StartProc joins it, so Pause/Resume (SIGSTOP/SIGCONT)
//     and Kill act on the host as a whole.
//
// Kill emulates the death of a host: the daemon is SIGKILLed first and
// reaped, then its clients, so the daemon never sees a client exit and never
// releases anything (exactly as when a machine loses power). The host's
// leases stay owned on disk until the other hosts see its host_id dead.
//
// The harness itself is not a test helper: it returns errors, so that a
// main program (the soak runner) can use it as well as tests.
package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/diskio"
	"github.com/gosanlock/gosanlock/internal/debtree"
	"github.com/gosanlock/gosanlock/testdisk/fusefault"
)

// Kind says which daemon an emulated host runs.
type Kind string

const (
	// C is the reference sanlock 3.8.5 binary.
	C Kind = "c"
	// Go is our daemon (cmd/sanlock).
	Go Kind = "go"
	// C395 is sanlock 3.9.5, run in the Debian trixie tree.
	C395 Kind = "c395"
	// C511 is sanlock 5.1.1, run in the Debian sid tree.
	C511 Kind = "c511"
)

// IsC reports whether the kind is one of the C sanlock daemons.
func (k Kind) IsC() bool { return k != Go }

// ParseKinds parses a comma-separated list such as "c,go,go" or
// "c,c395,c511,go".
func ParseKinds(s string) ([]Kind, error) {
	var ks []Kind
	for _, f := range strings.Split(s, ",") {
		switch k := Kind(strings.TrimSpace(f)); k {
		case C, Go, C395, C511:
			ks = append(ks, k)
		default:
			return nil, fmt.Errorf("harness: unknown host kind %q (want c, go, c395 or c511)", f)
		}
	}
	return ks, nil
}

// DefaultCBinary is the reference daemon.
const DefaultCBinary = "/usr/sbin/sanlock"

// Options configure a Cluster.
type Options struct {
	CBinary  string // default DefaultCBinary
	GoBinary string // our sanlock binary; needed for Go hosts
	BaseDir  string // where the work directory is made; default /var/tmp
	// DaemonArgs are appended to every daemon's command line, after the
	// harness's own `daemon -D -w 0 -l 0 -U root -G root -e NAME`.
	DaemonArgs []string
	// Logf, when set, receives progress lines.
	Logf func(format string, args ...any)
	// KeepDir keeps the work directory (daemon logs, holder logs) after
	// Close, for post-mortems.
	KeepDir bool
	// Trees are the Debian trees of the C395 and C511 hosts (trixie and
	// sid). A kind without an entry uses the built tree debtree.Find
	// returns; tests pass what debtree.Get gave them, so that a missing
	// tree skips the test (or fails it under CI=true).
	Trees map[Kind]*debtree.Tree
	// InitKind is the kind whose `sanlock direct init` writes the lease
	// areas of InitLockspace and InitResource: C (the default) and Go
	// write the old formats (delta 3.4, paxos 6.4), as C395 does; C511
	// writes the new ones (delta 5.0, paxos 7.0).
	InitKind Kind
}

// Cluster is a set of emulated hosts sharing the lease files of one
// backing directory.
type Cluster struct {
	opts    Options
	Dir     string // work directory
	Backing string // backing directory of the lease files

	mu     sync.Mutex
	hosts  []*Host
	closed bool
}

// NewCluster makes the work directory.
func NewCluster(o Options) (*Cluster, error) {
	if o.CBinary == "" {
		o.CBinary = DefaultCBinary
	}
	if o.BaseDir == "" {
		o.BaseDir = "/var/tmp"
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.InitKind == "" {
		o.InitKind = C
	}
	dir, err := os.MkdirTemp(o.BaseDir, "gosanlock-harness-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: o, Dir: dir, Backing: filepath.Join(dir, "backing")}
	if err := os.Mkdir(c.Backing, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return c, nil
}

// Logf logs through Options.Logf.
func (c *Cluster) Logf(format string, args ...any) { c.opts.Logf(format, args...) }

// BackingPath is the path of a lease file in the backing directory (not
// through any host's view).
func (c *Cluster) BackingPath(file string) string { return filepath.Join(c.Backing, file) }

// CreateFile makes a zeroed lease file of size bytes in the backing
// directory. Files must exist before a host opens them through its view.
func (c *Cluster) CreateFile(file string, size int64) error {
	f, err := os.OpenFile(c.BackingPath(file), os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Truncate(size)
}

// InitLockspace creates file (1 MiB) and writes an empty lockspace at
// offset 0 with the binary of Options.InitKind (`sanlock direct init -s`), with the
// given io_timeout in every delta lease (so that the first add_lockspace
// waits 2 x ioTimeout, not 2 x 10 s).
func (c *Cluster) InitLockspace(file, lockspace string, ioTimeout int) error {
	if err := c.CreateFile(file, 1<<20); err != nil {
		return err
	}
	return c.direct("init", "-s", fmt.Sprintf("%s:0:%s:0", lockspace, c.BackingPath(file)),
		"-o", strconv.Itoa(ioTimeout))
}

// InitResource creates file (1 MiB) and writes a free paxos lease for
// lockspace:resource at offset 0 (`sanlock direct init -r`). numHosts
// (0: the default 2000) bounds the host ids that may use it; every ballot
// reads (numHosts+2) sectors rounded up to a power of two, so a small value
// (8: 8 KiB instead of 1 MiB) makes acquisitions much cheaper.
func (c *Cluster) InitResource(file, lockspace, resource string, numHosts int) error {
	if err := c.CreateFile(file, 1<<20); err != nil {
		return err
	}
	args := []string{"init", "-r", fmt.Sprintf("%s:%s:%s:0", lockspace, resource, c.BackingPath(file))}
	if numHosts > 0 {
		args = append(args, "-n", strconv.Itoa(numHosts))
	}
	return c.direct(args...)
}

// direct runs `sanlock direct ARGS` with the binary of Options.InitKind
// (in its tree for C395 and C511: the backing files are under /var/tmp,
// which has the same path there).
func (c *Cluster) direct(args ...string) error {
	args = append([]string{"direct"}, args...)
	var cmd *exec.Cmd
	switch k := c.opts.InitKind; k {
	case C:
		cmd = exec.Command(c.opts.CBinary, args...)
	case Go:
		if c.opts.GoBinary == "" {
			return errors.New("harness: Options.GoBinary is needed to init with Go")
		}
		cmd = exec.Command(c.opts.GoBinary, args...)
	default:
		tr, err := c.tree(k)
		if err != nil {
			return err
		}
		cmd = tr.Command(nil, append([]string{"sanlock"}, args...)...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("sanlock direct %s (%s): %v: %s", strings.Join(args[1:], " "), c.opts.InitKind, err, out)
	}
	return nil
}

// Hosts returns the hosts in the order they were added.
func (c *Cluster) Hosts() []*Host {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Host(nil), c.hosts...)
}

// AddHost makes a host of the given kind: its view of the backing
// directory, its run directory, and a running daemon that answers on its
// socket.
func (c *Cluster) AddHost(kind Kind, name string) (*Host, error) {
	return c.addHost(kind, name, HostOptions{})
}

func (c *Cluster) addHost(kind Kind, name string, o HostOptions) (*Host, error) {
	bin := c.opts.CBinary
	var tr *debtree.Tree
	switch kind {
	case Go:
		bin = c.opts.GoBinary
		if bin == "" {
			return nil, errors.New("harness: Options.GoBinary is needed for Go hosts")
		}
	case C395, C511:
		var err error
		if tr, err = c.tree(kind); err != nil {
			return nil, err
		}
		bin = "sanlock" // the tree's
	}
	hdir := filepath.Join(c.Dir, name)
	if err := os.Mkdir(hdir, 0o700); err != nil {
		return nil, err
	}
	h := &Host{c: c, Kind: kind, Name: name, Dir: hdir, bin: bin, tree: tr,
		RunDir: filepath.Join(hdir, "run"), opts: o}
	if tr != nil {
		// hdir/run is the tree's /run; the daemon's SANLOCK_RUN_DIR is
		// /run/sanlock in there.
		h.RunDir = filepath.Join(hdir, "run", "sanlock")
	}
	if err := os.MkdirAll(h.RunDir, 0o700); err != nil {
		return nil, err
	}
	if err := h.setupHost(); err != nil {
		return nil, err
	}
	fs, err := fusefault.MountWith(c.Backing, filepath.Join(hdir, "disk"), fusefault.Options{SyncDIO: o.SyncDIO})
	if err != nil {
		h.closeWatchdog()
		return nil, err
	}
	h.FS = fs
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		fs.Close()
		h.closeWatchdog()
		return nil, errors.New("harness: cluster closed")
	}
	c.hosts = append(c.hosts, h)
	c.mu.Unlock()
	if err := h.Start(); err != nil {
		return nil, err
	}
	return h, nil
}

// Keep makes Close keep the work directory.
func (c *Cluster) Keep() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opts.KeepDir = true
}

// Close kills every host, unmounts every view and removes the work
// directory (unless KeepDir). It returns the first error.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	hosts := c.hosts
	keepDir := c.opts.KeepDir
	c.mu.Unlock()
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	var wg sync.WaitGroup
	for _, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.Kill()
		}()
	}
	wg.Wait()
	for _, h := range hosts {
		keep(h.FS.Close())
		keep(h.closeWatchdog())
	}
	if !keepDir {
		keep(os.RemoveAll(c.Dir))
	}
	return first
}

// ReadLeader reads and decodes the leader record in the 512-byte sector at
// off of a lease file, from the backing file (no host's view, so no fault
// applies). For a lockspace file, the delta lease of host_id H is at
// (H-1)*512; a resource's paxos leader is at its offset.
func (c *Cluster) ReadLeader(file string, off int64) (diskfmt.Leader, error) {
	d, err := diskio.OpenFile(c.BackingPath(file))
	if err != nil {
		return diskfmt.Leader{}, err
	}
	defer d.Close()
	buf := make([]byte, diskfmt.SectorSize512)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.ReadAt(ctx, buf, off); err != nil {
		return diskfmt.Leader{}, err
	}
	return diskfmt.DecodeLeader(buf)
}
