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

	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

// DefaultIOTimeout is sanlock's io_timeout in seconds when a request gives
// none (3.8.5's daemon ignores its own -o for lockspaces it joins).
const DefaultIOTimeout = 10

// Config holds what the lease manager takes from outside at construction.
// Zero values select the production choices.
type Config struct {
	Lockspaces LockspacesConfig
	Resources  ResourcesConfig
	// Usage, when set, replaces the resource side as the lockspaces see
	// it (tests of the kill escalation with made-up holders).
	Usage LockspaceUsage
}

// Settings are the daemon options the lease manager follows (docs/cli.md
// "Daemon options"); the daemon passes them in Env at Start.
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

// Env is what the lease manager needs from the process that runs it: the
// logger, the context that ends with the daemon, our host name, and the
// descriptor guard of every disk open.
type Env struct {
	Log      *zap.Logger
	Context  context.Context
	HostName string
	Settings Settings
	// GuardOpen, when set, wraps every disk opener (descriptor reserve).
	GuardOpen func(OpenFunc) OpenFunc
	// OnRenewal, when set, returns the delta.Config.OnRenewal hook of a
	// lockspace (metrics).
	OnRenewal func(space string) func(err error, readMs, writeMs int64)
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

// spawn starts fn on its own goroutine (Env.Go when set).
func (e *Env) spawn(fn func()) {
	if e.Go != nil {
		e.Go(fn)
		return
	}
	go fn()
}

// await blocks until ch is closed (Env.Await when set).
func (e *Env) await(ch <-chan struct{}) {
	if e.Await != nil {
		e.Await(ch)
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
// the resources (paxos leases) of its clients and the clients' state,
// wired to each other at construction. It knows nothing of sockets.
type Manager struct {
	Lockspaces *Lockspaces
	Resources  *Resources
	// Clients is the state of each client (registration, restrict
	// flags, kill program, kill marks); the daemon enters its connections.
	Clients *ClientRegistry
}

// New returns a manager with no lockspaces. Nothing runs until Start.
func New(cfg Config) *Manager {
	ls := newLockspaces(cfg.Lockspaces)
	res := newResources(cfg.Resources)
	ls.usage = res
	if cfg.Usage != nil {
		ls.usage = cfg.Usage
	}
	res.spaces = ls
	if res.cfg.Clock == nil {
		res.cfg.Clock = ls.cfg.Clock
	}
	cl := NewClientRegistry()
	ls.clients, res.clients = cl, cl
	return &Manager{Lockspaces: ls, Resources: res, Clients: cl}
}

// Start binds the manager to its environment; call it once, before any
// request.
func (m *Manager) Start(env Env) {
	if env.Log == nil {
		env.Log = zap.NewNop()
	}
	if env.Context == nil {
		env.Context = context.Background()
	}
	m.Lockspaces.env = env
	m.Resources.env = env
	if env.GuardOpen != nil {
		m.Lockspaces.cfg.Open = env.GuardOpen(m.Lockspaces.cfg.Open)
		m.Resources.cfg.Open = env.GuardOpen(m.Resources.cfg.Open)
	}
}

// Stop ends the background work (releases, examines, lockspace
// goroutines) after env.Context was cancelled, and waits for it.
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
