// Package inproc runs a gosanlock daemon inside the test process, so that
// tests of the client API and of package lease need neither root nor a
// sanlock binary: a daemon.Server with a real lease manager, served on a
// Unix socket in a private run directory, whose lease storage is an
// in-memory disk (testdisk.Mem).
//
// The daemon's storage is one lease "file": lockspace "LS" at offset 0
// (io_timeout 1) and resources R1..Rn at 1 MiB, 2 MiB, ... The file at
// Daemon.Path exists but stays empty (a release checks that its disk is
// still there); every read and write of that path goes to Daemon.Disk.
// Other paths are opened as real files.
//
// Start serves on a Unix socket, in real time. StartInMemory serves over
// in-memory connections instead, for tests inside a synctest bubble: the
// daemon's timers then run on the bubble's clock, so a join that takes
// seconds takes none.
package inproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/daemon"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/diskio"
	"github.com/gosanlock/gosanlock/internal/testutil"
	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/testdisk"
)

// Daemon is a running in-process daemon.
type Daemon struct {
	// RunDir is the daemon's run directory (its socket is there): pass it
	// to client.Dial or as lease.Config.RunDir.
	RunDir string
	// Path is the lease file's path, as clients name it.
	Path string
	// Disk holds the lease file's contents.
	Disk *testdisk.Mem

	dir    string
	stop   context.CancelFunc
	served chan error
	// ln, when set, is the in-memory listener (StartInMemory).
	ln *pipeListener
}

// mib is the distance between two resources of the layout.
const mib = 1 << 20

// Start starts a daemon whose storage holds lockspace "LS" and resources
// R1..R(nres) (see the package doc), in a new directory under /tmp (a
// short path: the socket's must fit in 107 bytes). Stop ends it.
func Start(nres int) (*Daemon, error) {
	dir, err := os.MkdirTemp("", "gsip")
	if err != nil {
		return nil, err
	}
	d := &Daemon{RunDir: filepath.Join(dir, "run"), Path: filepath.Join(dir, "leases"), dir: dir,
		Disk: testdisk.NewMem(int64(nres+1)*mib, 512), served: make(chan error, 1)}
	if err := d.start(nres); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return d, nil
}

// StartT is Start for one test: it fails t on error and stops the daemon
// at cleanup.
func StartT(t testing.TB, nres int) *Daemon {
	t.Helper()
	d, err := Start(nres)
	if err != nil {
		t.Fatalf("in-process daemon: %v", err)
	}
	t.Cleanup(d.Stop)
	return d
}

func (d *Daemon) start(nres int) error {
	if err := os.Mkdir(d.RunDir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(d.Path, nil, 0o600); err != nil {
		return err
	}
	if err := format(d.Disk, nres); err != nil {
		return err
	}
	var ln net.Listener = d.ln
	if d.ln == nil {
		var err error
		if ln, err = net.Listen("unix", filepath.Join(d.RunDir, client.SockName)); err != nil {
			return err
		}
	}
	srv := newServer(d.RunDir, d.open)
	ctx, stop := context.WithCancel(context.Background())
	d.stop = stop
	go func() { d.served <- srv.Serve(ctx, ln) }()
	return nil
}

// newServer is the one place the daemon and its lease manager are put
// together: a daemon configured for tests (unprivileged, no watchdog,
// logs under runDir) with a manager whose disks open through open.
func newServer(runDir string, open func(string) (diskfmt.Device, error)) *daemon.Server {
	cfg := testutil.DaemonConfig(runDir)
	cfg.OurHostName = "inproc"
	return daemon.New(cfg, daemon.Deps{Manager: manager.Setup{Open: open}, Stderr: io.Discard})
}

// format writes lockspace "LS" (io_timeout 1) and resources R1..R(nres).
func format(disk *testdisk.Mem, nres int) error {
	ctx := context.Background()
	if err := diskfmt.WriteLockspace(ctx, disk, 0, 0, "LS", 1, 0); err != nil {
		return err
	}
	g, err := diskfmt.GeometryForWrite(0, disk.SectorSize())
	if err != nil {
		return err
	}
	for i := 1; i <= nres; i++ {
		err := diskfmt.WriteResource(ctx, []diskfmt.ResourceDisk{{Dev: disk, Offset: int64(i) * mib}}, 0,
			diskfmt.PaxosInit{Geometry: g, SpaceName: "LS", ResourceName: fmt.Sprintf("R%d", i)})
		if err != nil {
			return err
		}
	}
	return nil
}

// open sends the lease file's I/O to the memory disk, which stays open
// when the manager closes its device.
func (d *Daemon) open(path string) (diskfmt.Device, error) {
	if path == d.Path {
		return keepOpen{d.Disk}, nil
	}
	return diskio.OpenFile(path)
}

type keepOpen struct{ *testdisk.Mem }

func (keepOpen) Close() error { return nil }

// StartInMemory is StartT over in-memory connections (net.Pipe), for a
// test inside a synctest bubble (call it there). The daemon takes every
// connection for one of this process: REGISTER registers it. Event
// listeners need a socket and are refused.
func StartInMemory(t testing.TB, nres int) *Daemon {
	t.Helper()
	dir := t.TempDir()
	d := &Daemon{RunDir: filepath.Join(dir, "run"), Path: filepath.Join(dir, "leases"), dir: dir,
		Disk: testdisk.NewMem(int64(nres+1)*mib, 512), served: make(chan error, 1), ln: newPipeListener()}
	if err := d.start(nres); err != nil {
		t.Fatalf("in-memory daemon: %v", err)
	}
	t.Cleanup(d.Stop)
	return d
}

// Client returns a client of the daemon.
func (d *Daemon) Client() *client.Client {
	cl, err := client.Dial(d.RunDir)
	if err != nil {
		panic(err) // the run directory is short enough by construction
	}
	if d.ln != nil {
		cl.Dialer = d.ln.dial
	}
	return cl
}

// pipeListener hands the daemon the far ends of in-memory connections.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// peerConn is the daemon's end: it names this process as the peer (the
// daemon asks a connection that is not a Unix socket for PeerPid).
type peerConn struct{ net.Conn }

func (peerConn) PeerPid() int { return os.Getpid() }

// dial is the client's Dialer.
func (l *pipeListener) dial(ctx context.Context) (net.Conn, error) {
	ours, theirs := net.Pipe()
	select {
	case l.conns <- peerConn{theirs}:
		return ours, nil
	case <-l.done:
		return nil, &client.Error{Code: client.RvECONNREFUSED}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// Stop stops the daemon (its connections are closed: registered clients
// see the daemon gone) and removes its directory. It may be called more
// than once.
func (d *Daemon) Stop() {
	if d.stop == nil {
		return
	}
	d.stop()
	d.stop = nil
	if err := <-d.served; err != nil && !errors.Is(err, daemon.ErrServerClosed) {
		fmt.Fprintf(os.Stderr, "inproc: daemon ended with %v\n", err)
	}
	os.RemoveAll(d.dir)
}
