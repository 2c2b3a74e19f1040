package lease

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/gosanlock/gosanlock/client"
)

// ErrExists: Init found a lease already written at the place it was asked
// to prepare (InitOptions.Overwrite writes over it).
var ErrExists = errors.New("lease: a lease is already written there")

// InitOptions are the options of InitLockspace and InitResource.
type InitOptions struct {
	// RunDir is the daemon's run directory ("" = client.RunDir()).
	RunDir string
	// MaxHosts is the number of host_id slots of a lockspace, or of hosts
	// that may hold a resource lease (0 = the daemon's default, 2000).
	MaxHosts uint32
	// Overwrite writes even when a valid or damaged lease is found at the
	// place: whatever it held is lost, and a lease that a host holds
	// there stops protecting anything. Only for storage that no host
	// uses.
	Overwrite bool
}

// InitLockspace writes lockspace ls on storage (every host_id slot free,
// ls.IOTimeout stored in it; ls.HostID is not used), through the daemon,
// which opens the storage with its own permissions and direct I/O (as
// `sanlock client init -s` does). It is done once, before any host joins.
//
// Unless opt.Overwrite is set, it first reads the place and returns an
// error matching ErrExists when a lockspace or a resource lease is already
// there (ErrCorrupt when something damaged is). The check does not make
// two concurrent inits safe: prepare storage from one place.
func InitLockspace(ctx context.Context, ls Lockspace, opt InitOptions) error {
	e := &Error{Op: "init", Name: ls.Name, Path: ls.Path, Offset: ls.Offset}
	cl, err := client.Dial(opt.RunDir)
	if err != nil {
		return e.with(ErrInvalid, err)
	}
	disk := client.Disk{Path: ls.Path, Offset: ls.Offset}
	if !opt.Overwrite {
		if err := checkFree(ctx, cl, disk, e); err != nil {
			return err
		}
	}
	cls := &client.Lockspace{Name: ls.Name, Disk: disk}
	if err := cl.WriteLockspace(ctx, cls, opt.MaxHosts, ls.IOTimeout); err != nil {
		return e.fromDaemon(cl, err)
	}
	return nil
}

// InitResource writes the resource lease r on storage through the daemon
// (as `sanlock client init -r` does), free, at lease version 0. r.Lockspace
// must name the lockspace the lease belongs to; r.Shared is not used. It
// is done once, before any host acquires the lease; the overwrite check is
// InitLockspace's.
func InitResource(ctx context.Context, r Resource, opt InitOptions) error {
	e := &Error{Op: "init", Name: r.Lockspace + ":" + r.Name, Path: r.Path, Offset: r.Offset}
	if r.Lockspace == "" || r.Name == "" {
		return e.with(ErrInvalid, errors.New("the lockspace and resource names must be set"))
	}
	cl, err := client.Dial(opt.RunDir)
	if err != nil {
		return e.with(ErrInvalid, err)
	}
	disk := client.Disk{Path: r.Path, Offset: r.Offset}
	if !opt.Overwrite {
		if err := checkFree(ctx, cl, disk, e); err != nil {
			return err
		}
	}
	res := &client.Resource{LockspaceName: r.Lockspace, Name: r.Name, Disks: []client.Disk{disk}}
	if err := cl.WriteResource(ctx, res, opt.MaxHosts, 0, 0); err != nil {
		return e.fromDaemon(cl, err)
	}
	return nil
}

// checkFree reads the place as a lockspace and as a resource lease: both
// must find no lease there (SANLK_LEADER_MAGIC).
func checkFree(ctx context.Context, cl *client.Client, disk client.Disk, e *Error) error {
	ls, _, err := cl.ReadLockspace(ctx, &client.Lockspace{Disk: disk})
	if err == nil {
		return e.with(ErrExists, fmt.Errorf("lockspace %s is written there", ls.Name))
	}
	if !errors.Is(err, client.ErrLeaderMagic) {
		return e.occupied(cl, err)
	}
	res, err := cl.ReadResource(ctx, &client.Resource{Disks: []client.Disk{disk}})
	if err == nil {
		return e.with(ErrExists, fmt.Errorf("resource lease %s:%s is written there", res.LockspaceName, res.Name))
	}
	if !errors.Is(err, client.ErrLeaderMagic) {
		return e.occupied(cl, err)
	}
	return nil
}

// occupied is the error of a read of the place that found neither nothing
// nor a valid lease.
func (e *Error) occupied(cl *client.Client, err error) error {
	err = e.fromDaemon(cl, err)
	var le *Error
	if errors.As(err, &le) && le.Kind == ErrCorrupt {
		le.Err = fmt.Errorf("a damaged lease is there (InitOptions.Overwrite writes over it): %s", cause(le.Err))
	}
	return err
}

// with returns a copy of e with kind and err.
func (e *Error) with(kind, err error) *Error {
	c := *e
	c.Kind, c.Err = kind, err
	return &c
}

// fromDaemon classifies a daemon error of e's operation and names the
// socket when the daemon could not be reached.
func (e *Error) fromDaemon(cl *client.Client, err error) error {
	w := wrap(e.Op, e.Name, err)
	var le *Error
	if !errors.As(w, &le) {
		return w
	}
	c := e.with(le.Kind, le.Err)
	if unreachable(cl, err) {
		c.Kind, c.Socket = ErrDaemonUnavailable, cl.SockPath
	}
	return c
}

// unreachable reports whether err means that no daemon answers on cl's
// socket: refused, or ENOENT with no socket file (a daemon's own ENOENT
// is about a lease file).
func unreachable(cl *client.Client, err error) bool {
	switch client.ErrorCode(err) {
	case client.RvECONNREFUSED:
		return true
	case client.RvENOENT:
		_, serr := os.Stat(cl.SockPath)
		return serr != nil
	}
	return false
}
