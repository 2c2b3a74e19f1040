// Package manager is the lease manager of one host: the lockspaces it
// joins (delta leases, docs/delta.md), the resource leases of its clients
// (paxos leases, docs/paxos.md), the kill escalation when a lockspace
// fails, and the disk commands. It knows nothing of sockets: the daemon
// translates wire requests into its typed requests and its errors (which
// carry the wire result, rescode.CodeOf) into replies. See
// docs/architecture.md.
package manager

import (
	"context"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/diskio"
	"github.com/gosanlock/gosanlock/rescode"
)

// DefaultIOTimeout is sanlock's io_timeout in seconds when a request gives
// none (3.8.5's daemon ignores its own -o for lockspaces it joins).
const DefaultIOTimeout = 10

// Setup is everything the lease manager takes from outside, given once to
// New. Zero values select the production choices. The first group is what
// the manager does to the world (tests and the simulator replace it), the
// second what the daemon that runs it knows (its logger, context, host
// name, options and client registry), the last how its goroutines are
// scheduled.
type Setup struct {
	// Clock is the monotonic clock of every lockspace and of the
	// background release retries (nil: clock.NewSystem(), i.e.
	// CLOCK_MONOTONIC).
	Clock clock.Clock
	// Open opens a lease disk, lockspace or resource (nil:
	// diskfmt.OpenFile, O_DIRECT|O_SYNC). Any error makes add_lockspace
	// fail with -ENODEV.
	Open OpenFunc
	// Kill sends a signal to a lease holder (nil: kill(2)).
	Kill func(pid int, sig syscall.Signal) error
	// RunKillpath starts a holder's kill program without waiting for it
	// (nil: fork/exec, reaped in the background).
	RunKillpath func(argv []string) error
	// OpenWatchdog connects one lockspace to the watchdog multiplexer when
	// the daemon uses the watchdog (nil: wdmd over its socket,
	// Settings.WdmdSocket or /run/wdmd/wdmd.sock).
	OpenWatchdog func(space string, hostID uint64) (WatchdogSession, error)
	// CheckInterval is the main-loop pass of each lockspace (0: 1 s); while
	// holders are being killed passes come every CheckInterval/5.
	CheckInterval time.Duration
	// PollInterval is how often a synchronous rem_lockspace and an
	// INQ_WAIT inq_lockspace look again (0: 1 s, as sanlock).
	PollInterval time.Duration
	// Examine, when set, replaces the resource side's examine of the
	// resources held in a lockspace: after another host set our bit
	// (request notification), and for EXAMINE_LOCKSPACE. It must not block.
	Examine func(space string)
	// Usage, when set, replaces the resource side as the lockspaces see
	// it (tests of the kill escalation with made-up holders).
	Usage LockspaceUsage

	// Log receives the manager's log lines (nil: none).
	Log *zap.Logger
	// Context ends with the daemon: the lockspaces and background work
	// stop with it (nil: context.Background()).
	Context  context.Context
	HostName string
	Settings Settings
	// OnRenewal, when set, returns the delta.Config.OnRenewal hook of a
	// lockspace (metrics).
	OnRenewal func(space string) func(err error, readMs, writeMs int64)
	// Clients, when set, is the client registry to use (the daemon's,
	// which enters its connections); nil: a new one.
	Clients *ClientRegistry

	// Go, when set, starts each goroutine of the manager (lockspace
	// threads and renewal runners, background releases, examines) instead
	// of a go statement, and Await, when set, waits for a channel to be
	// closed instead of a receive. The simulator (testdisk/sim) sets both
	// to run the manager as its scheduled tasks, one at a time, in an order
	// fixed by its seed (docs/testing.md "The real manager in the
	// simulator"). Production leaves them nil.
	Go    func(fn func())
	Await func(ch <-chan struct{})
}

// Settings are the daemon options the lease manager follows (docs/cli.md
// "Daemon options"); the daemon passes them in Setup.
type Settings struct {
	// IOTimeout is the daemon's io_timeout (-o, io_timeout): what an
	// add_lockspace that passes 0 joins with (0: DefaultIOTimeout).
	IOTimeout            int
	UseWatchdog          bool
	WdmdSocket           string // "" : wdmdclient.DefaultSocket
	WatchdogFireTimeout  int
	KillGraceSeconds     int
	SetBitmapSeconds     int
	RenewalHistorySize   int
	RenewalReadExtendSet bool
	RenewalReadExtendSec int
	DebugRenew           bool
	ShRetries            int
	WriteInitIOTimeout   int
	// DeltaVersion and PaxosVersion are the versions WRITE_LOCKSPACE and
	// WRITE_RESOURCE write (0: diskfmt.DeltaVersion, diskfmt.PaxosVersion).
	DeltaVersion uint32
	PaxosVersion uint32
	// GenerationDir, when it names an existing directory, receives the
	// generation of each lockspace joined (generation.go); "": none.
	GenerationDir string
}

// withDefaults returns s with its zero values replaced by the production
// choices.
func (s Setup) withDefaults() *Setup {
	if s.Clock == nil {
		s.Clock = clock.NewSystem()
	}
	if s.Open == nil {
		s.Open = func(p string) (diskfmt.Device, error) { return diskio.OpenFile(p) }
	}
	if s.Kill == nil {
		s.Kill = func(pid int, sig syscall.Signal) error { return unix.Kill(pid, sig) }
	}
	if s.RunKillpath == nil {
		s.RunKillpath = startKillpath
	}
	if s.CheckInterval <= 0 {
		s.CheckInterval = time.Second
	}
	if s.PollInterval <= 0 {
		s.PollInterval = time.Second
	}
	if s.Clients == nil {
		s.Clients = NewClientRegistry()
	}
	if s.Log == nil {
		s.Log = zap.NewNop()
	}
	if s.Context == nil {
		s.Context = context.Background()
	}
	return &s
}

// spawn starts fn on its own goroutine (Setup.Go when set).
func (s *Setup) spawn(fn func()) {
	if s.Go != nil {
		s.Go(fn)
		return
	}
	go fn()
}

// await blocks until ch is closed (Setup.Await when set).
func (s *Setup) await(ch <-chan struct{}) {
	if s.Await != nil {
		s.Await(ch)
		return
	}
	<-ch
}

// OpenFunc opens a lease disk.
type OpenFunc = func(path string) (diskfmt.Device, error)

// ClientID identifies a client for as long as the daemon runs (never
// reused, unlike connection slots): the daemon keeps the connection, the
// manager keys the client's state (Manager.Clients) and its leases by ID.
// 0 is no client.
type ClientID uint64

// Listener is a REG_EVENT connection handed to a lockspace.
type Listener interface {
	// SendNoWait writes b in one non-blocking send.
	SendNoWait(b []byte) error
	// Ended does a non-blocking read: true when the listener sent the
	// end marker, hung up or failed.
	Ended() bool
	// FD is the descriptor number, for log lines.
	FD() int
	Close() error
	ListenerHandover
}

// Manager is the lease manager of one host: the lockspaces (delta leases),
// the resources (paxos leases) of its clients, the clients' state and the
// disk commands, wired to each other at construction. It knows nothing of sockets.
type Manager struct {
	Lockspaces *Lockspaces
	Resources  *Resources
	// Clients is the state of each client (registration, restrict
	// flags, kill program, kill marks); the daemon enters its connections.
	Clients *ClientRegistry
	// Disk are the disk commands that need no client's lease set.
	Disk *DiskOps
}

// New returns a manager with no lockspaces, bound to s; nothing runs
// until the first request.
func New(s Setup) *Manager {
	cfg := s.withDefaults()
	ls := &Lockspaces{cfg: cfg, clients: cfg.Clients}
	res := newResources(cfg)
	ls.usage = res
	if cfg.Usage != nil {
		ls.usage = cfg.Usage
	}
	res.spaces = ls
	return &Manager{Lockspaces: ls, Resources: res, Clients: cfg.Clients, Disk: newDiskOps(ls)}
}

// Stop ends the background work (releases, examines, lockspace
// goroutines) after Setup.Context was cancelled, and waits for it.
func (m *Manager) Stop() {
	m.Resources.wait()
	m.Lockspaces.wait()
}

// codeErr turns a result code into an error: nil for 0, else the code.
func codeErr(c rescode.Code) error {
	if c == 0 {
		return nil
	}
	return c
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
