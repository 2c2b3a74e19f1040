package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/internal/debtree"
	"github.com/gosanlock/gosanlock/testdisk/fusefault"
)

// Host is one emulated host: a daemon, its client processes and its view
// of the storage.
type Host struct {
	c      *Cluster
	Kind   Kind
	Name   string
	Dir    string // host directory: run/, disk/ (the view), logs
	RunDir string // SANLOCK_RUN_DIR of the daemon and its clients (for a tree host: as the host sees it)
	FS     *fusefault.FS
	bin    string
	tree   *debtree.Tree // C395 and C511: the daemon's tree
	opts   HostOptions
	wd     *hostWatchdog // nil without HostOptions.Watchdog

	mu     sync.Mutex
	daemon *Proc
	procs  []*Proc
	starts int
}

// Proc is a process started by the harness.
type Proc struct {
	Cmd  *exec.Cmd
	Name string
	done chan struct{}
	err  error // valid after done
}

// PID returns the process id.
func (p *Proc) PID() int { return p.Cmd.Process.Pid }

// Done is closed when the process has exited and been reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is the process's exit error; valid after Done.
func (p *Proc) Err() error { <-p.done; return p.err }

// Wait waits at most d for the process to exit.
func (p *Proc) Wait(d time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		return fmt.Errorf("%s (pid %d) still running after %v", p.Name, p.PID(), d)
	}
}

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the process if it is still running.
func (p *Proc) Signal(sig syscall.Signal) error {
	if p.Exited() {
		return nil
	}
	return p.Cmd.Process.Signal(sig)
}

func startProc(cmd *exec.Cmd, name string) (*Proc, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Proc{Cmd: cmd, Name: name, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Path returns the path of a lease file as this host sees it.
func (h *Host) Path(file string) string { return h.FS.Path(file) }

// Client returns a client of this host's daemon.
func (h *Host) Client() *client.Client {
	return &client.Client{SockPath: filepath.Join(h.RunDir, client.SockName)}
}

// Env is the environment of a process that talks to this host's daemon.
func (h *Host) Env() []string {
	return append(os.Environ(), "SANLOCK_RUN_DIR="+h.RunDir, "SANLOCK_PRIVILEGED=0")
}

// Daemon returns the current daemon process (nil before Start).
func (h *Host) Daemon() *Proc {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.daemon
}

// Start starts the daemon (again, after Kill) and waits until it answers
// on its socket. A host with a watchdog first starts its wdmd if that is
// not running.
func (h *Host) Start() error {
	h.mu.Lock()
	if h.daemon != nil && !h.daemon.Exited() {
		h.mu.Unlock()
		return fmt.Errorf("harness: %s: daemon already running", h.Name)
	}
	h.starts++
	logPath := filepath.Join(h.Dir, fmt.Sprintf("daemon.%d.log", h.starts))
	h.mu.Unlock()
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	if err := h.startWdmd(); err != nil {
		return err
	}
	args, env := h.daemonCommand()
	var cmd *exec.Cmd
	if h.tree != nil {
		cmd = h.treeDaemonCmd(args, env)
	} else {
		cmd = exec.Command(h.bin, args...)
		cmd.Env = append(h.Env(), env...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	cmd.Dir = h.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	p, err := startProc(cmd, h.Name+" daemon")
	if err != nil {
		return fmt.Errorf("harness: %s: start daemon: %w", h.Name, err)
	}
	h.mu.Lock()
	h.daemon = p
	h.mu.Unlock()
	h.c.Logf("%s: %s daemon pid %d, run dir %s", h.Name, h.Kind, p.PID(), h.RunDir)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if p.Exited() {
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("harness: %s: daemon exited: %v: %s", h.Name, p.err, log)
		}
		cl := h.Client()
		cl.Timeout = time.Second
		if _, err := cl.Status(context.Background(), 1); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("harness: %s: daemon does not answer on %s", h.Name, cl.SockPath)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// StartProc starts a client process of this host, in the host's process
// group, with SANLOCK_RUN_DIR set; stdout and stderr go to a log file in
// the host directory (returned with the process).
func (h *Host) StartProc(name string, argv ...string) (*Proc, string, error) {
	d := h.Daemon()
	if d == nil || d.Exited() {
		return nil, "", fmt.Errorf("harness: %s: no daemon", h.Name)
	}
	logPath := filepath.Join(h.Dir, name+".out")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, "", err
	}
	defer logf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = h.Env()
	cmd.Dir = h.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: d.PID(), Pdeathsig: syscall.SIGKILL}
	p, err := startProc(cmd, h.Name+" "+name)
	if err != nil {
		return nil, "", fmt.Errorf("harness: %s: start %s: %w", h.Name, name, err)
	}
	h.mu.Lock()
	h.procs = append(h.procs, p)
	h.mu.Unlock()
	return p, logPath, nil
}

// Procs returns the client processes started on this host.
func (h *Host) Procs() []*Proc {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*Proc(nil), h.procs...)
}

// signalGroup sends sig to the host's process group (daemon and clients).
func (h *Host) signalGroup(sig syscall.Signal) error {
	d := h.Daemon()
	if d == nil {
		return fmt.Errorf("harness: %s: never started", h.Name)
	}
	err := syscall.Kill(-d.PID(), sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// Pause stops every process of the host (SIGSTOP to its process group), as
// if the machine froze, and its wdmd if it has one (the watchdog device
// keeps counting). Its storage view keeps serving other hosts.
func (h *Host) Pause() error {
	h.signalWdmd(syscall.SIGSTOP)
	return h.signalGroup(syscall.SIGSTOP)
}

// Resume continues a paused host (SIGCONT).
func (h *Host) Resume() error {
	h.signalWdmd(syscall.SIGCONT)
	return h.signalGroup(syscall.SIGCONT)
}

// PauseDaemon stops only the daemon (its clients keep running).
func (h *Host) PauseDaemon() error {
	if d := h.Daemon(); d != nil {
		return d.Signal(syscall.SIGSTOP)
	}
	return nil
}

// ResumeDaemon continues a daemon stopped by PauseDaemon.
func (h *Host) ResumeDaemon() error {
	if d := h.Daemon(); d != nil {
		return d.Signal(syscall.SIGCONT)
	}
	return nil
}

// Kill emulates the death of the host: SIGKILL to the daemon, wait for it
// to be reaped, then SIGKILL to the rest of its process group and to every
// client process, and wait for them. A process blocked in I/O that the
// host's fault holds (Hang) cannot exit until the I/O ends (the kernel waits
// for in-flight async I/O at exit, as with a real hung disk); after 3 s Kill
// switches such a view to EIO so that the dead host can go away. Kill
// returns the time the daemon was reaped. A host's wdmd dies last; its
// device stays armed.
func (h *Host) Kill() (time.Time, error) {
	d := h.Daemon()
	if d == nil {
		h.killWdmd()
		return time.Time{}, nil
	}
	h.unhangAfter(d, 3*time.Second)
	d.Signal(syscall.SIGCONT) // a stopped process dies on SIGKILL anyway; be explicit
	d.Signal(syscall.SIGKILL)
	<-d.done
	dead := time.Now()
	syscall.Kill(-d.PID(), syscall.SIGKILL) // daemon helpers and clients in the group
	var err error
	for _, p := range h.Procs() {
		p.Signal(syscall.SIGKILL)
		h.unhangAfter(p, 3*time.Second)
		if e := p.Wait(30 * time.Second); e != nil && !p.Exited() && err == nil {
			err = e
		}
	}
	h.killWdmd()
	return dead, err
}

// unhangAfter switches the host's view from Hang to EIO if p has not
// exited after d.
func (h *Host) unhangAfter(p *Proc, d time.Duration) {
	go func() {
		select {
		case <-p.done:
		case <-time.After(d):
			if f := h.FS.Fault(); f.Mode == fusefault.Hang {
				h.c.Logf("%s: %s stuck in hung I/O, failing the host's I/O with EIO", h.Name, p.Name)
				h.FS.SetFault(fusefault.Fault{Mode: fusefault.Error})
			}
		}
	}()
}

// SetFault changes this host's storage behaviour (see fusefault.Fault).
func (h *Host) SetFault(f fusefault.Fault) {
	h.c.Logf("%s: storage fault: %v", h.Name, f)
	h.FS.SetFault(f)
}

// AddLockspace joins lockspace ls (whose delta leases are at offset 0 of
// file) as hostID with the given io_timeout, and waits for the join.
func (h *Host) AddLockspace(ls string, hostID uint64, file string, ioTimeout uint32) error {
	l := &client.Lockspace{Name: ls, HostID: hostID, Disk: client.Disk{Path: h.Path(file)}}
	if err := h.Client().AddLockspace(context.Background(), l, 0, ioTimeout); err != nil {
		return fmt.Errorf("harness: %s: add_lockspace %s:%d: %w", h.Name, ls, hostID, err)
	}
	return nil
}

// Resource returns the resource lockspace:name at offset 0 of file, as this
// host sees it.
func (h *Host) Resource(ls, name, file string) client.Resource {
	return client.Resource{LockspaceName: ls, Name: name,
		Disks: []client.Disk{{Path: h.Path(file)}}}
}

// WaitHostState waits until this host's daemon reports hostID in lockspace
// ls in the given state (client.HostLive, ...), or ctx ends.
func (h *Host) WaitHostState(ctx context.Context, ls string, hostID uint64, state uint32) error {
	for {
		hosts, err := h.Client().GetHosts(context.Background(), ls, hostID)
		if err == nil {
			for _, x := range hosts {
				if x.HostID == hostID && x.Flags&0xF == state {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("harness: %s: host %d of %s not in state %d: %w (last err %v)",
				h.Name, hostID, ls, state, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
