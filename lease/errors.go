package lease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"

	"github.com/gosanlock/gosanlock/client"
)

// Sentinel errors. Every error this package returns for a daemon result
// matches exactly one of them with errors.Is (see Classify for the table);
// errors.As with *client.Error still gives the raw result code.
var (
	// ErrLocked: another host (or another process here) holds the lease, or
	// won the ballot this attempt was in. TryAcquire returns a *LockedError
	// that says who, when the daemon knows. Acquire retries these.
	ErrLocked = errors.New("lease: held by another owner")
	// ErrLockspaceNotJoined: the lease's lockspace is not joined on this
	// host, is still being joined, or is failing.
	ErrLockspaceNotJoined = errors.New("lease: lockspace not joined")
	// ErrLost: the lease was taken away while held (lockspace failure,
	// another host's request, daemon gone). Lease.Err returns a *LostError.
	ErrLost = errors.New("lease: lost")
	// ErrNotHeld: Release or Token of a lease this session does not hold.
	ErrNotHeld = errors.New("lease: not held")
	// ErrAlreadyHeld: Acquire of a lease this process already holds (the
	// daemon allows one holding per resource and host).
	ErrAlreadyHeld = errors.New("lease: already held")
	// ErrNoLease: there is no (valid) lease at the given path and offset,
	// or it belongs to another lockspace or resource name.
	ErrNoLease = errors.New("lease: no such lease on storage")
	// ErrCorrupt: the lease on storage fails its checksum or consistency
	// checks.
	ErrCorrupt = errors.New("lease: lease on storage is damaged")
	// ErrStorage: reading or writing the lease storage failed or timed out.
	ErrStorage = errors.New("lease: storage I/O failed")
	// ErrVersion: a lease version (lver) given with a request did not match.
	ErrVersion = errors.New("lease: lease version mismatch")
	// ErrHostIDBusy: the host_id is in use by another host; the join failed.
	ErrHostIDBusy = errors.New("lease: host_id used by another host")
	// ErrOrphan: an orphan of this resource exists (a persistent lease
	// whose holder died) and must be adopted or released first.
	ErrOrphan = errors.New("lease: orphan lease exists")
	// ErrInvalid: the daemon rejected the request itself (bad name, too
	// many disks, bad host_id...).
	ErrInvalid = errors.New("lease: invalid request")
	// ErrDaemonUnavailable: no daemon answers on the socket, or it closed
	// the connection.
	ErrDaemonUnavailable = errors.New("lease: daemon unavailable")
	// ErrSessionClosed: the session was closed, or its lockspace or daemon
	// went away (see Session.Err).
	ErrSessionClosed = errors.New("lease: session closed")
	// ErrDaemon: any other failure reported by the daemon.
	ErrDaemon = errors.New("lease: daemon error")
)

// Classify maps a daemon result code to its sentinel (nil for codes >= 0):
//
//	ErrLocked              -243 IDLIVE, -244 OWNED, -245 OTHER, -246 SHRETRY,
//	                       -247 OWNED_RETRY, -212 DBLOCK_LVER, -213 DBLOCK_MBAL,
//	                       -11 EAGAIN, -16 EBUSY
//	ErrLockspaceNotJoined  -28 ENOSPC, -115 EINPROGRESS, -241 ACQUIRE_LOCKSPACE
//	ErrAlreadyHeld         -17 EEXIST (ErrLocked for an acquire: another local holder)
//	ErrNotHeld             -2 ENOENT (release), -250/-252 RELEASE_LVER, -251/-253 RELEASE_OWNER
//	ErrNoLease             -223 LEADER_MAGIC, -226 LEADER_LOCKSPACE, -227 LEADER_RESOURCE,
//	                       -274 RINDEX_MAGIC, -276 RINDEX_LOCKSPACE, -277 RINDEX_OFFSET
//	ErrCorrupt             -214, -222, -224, -225, -228, -229, -230, -260, -261,
//	                       -270, -271, -275, -278
//	ErrStorage             -202 AIO_TIMEOUT, -210, -211, -220, -221, -242 IDDISK, -5 EIO
//	ErrVersion             -240 ACQUIRE_LVER, -272 REQUEST_OLD, -273 REQUEST_LVER
//	ErrHostIDBusy          -262 HOSTID_BUSY
//	ErrOrphan              -117 EUCLEAN
//	ErrInvalid             -7, -22, -34, -231, -1, -6, -19, -107, -79, -80, -81
//	ErrDaemonUnavailable   -111 ECONNREFUSED, -3 ESRCH, -25 ENOTTY, -116 ESTALE
//	ErrDaemon              everything else (-201, -203, -12, ...)
//
// op matters for one code: ENOENT means "not held" for a release and "no
// such lockspace" for lockspace commands; elsewhere it is ErrNoLease.
func Classify(op string, code int) error {
	if code >= 0 {
		return nil
	}
	switch code {
	case client.SanlkAcquireIDLive, client.SanlkAcquireOwned, client.SanlkAcquireOther,
		client.SanlkAcquireShRetry, client.SanlkAcquireOwnedRetry,
		client.SanlkDblockLVer, client.SanlkDblockMbal, client.RvEAGAIN, client.RvEBUSY:
		return ErrLocked
	case client.RvENOSPC, client.RvEINPROGRESS, client.SanlkAcquireLockspace:
		return ErrLockspaceNotJoined
	case client.RvEEXIST:
		if op == "acquire" {
			// Held on this host by another process (or another
			// session of this one).
			return ErrLocked
		}
		return ErrAlreadyHeld
	case client.RvENOENT:
		switch op {
		case "release":
			return ErrNotHeld
		case "join", "leave":
			return ErrLockspaceNotJoined
		}
		return ErrNoLease
	case client.SanlkReleaseLVer, client.SanlkReleaseOwner, client.SanlkReleaseLVer5, client.SanlkReleaseOwner5:
		return ErrNotHeld
	case client.SanlkLeaderMagic, client.SanlkLeaderLockspace, client.SanlkLeaderResource,
		client.SanlkRIndexMagic, client.SanlkRIndexLockspace, client.SanlkRIndexOffset:
		return ErrNoLease
	case client.SanlkDblockChecksum, client.SanlkLeaderDiff, client.SanlkLeaderVersion,
		client.SanlkLeaderSectorSize, client.SanlkLeaderNumHosts, client.SanlkLeaderChecksum,
		client.SanlkAddLSSizes, client.SanlkRenewOwner, client.SanlkRenewDiff,
		client.SanlkRequestMagic, client.SanlkRequestVersion, client.SanlkRIndexVersion,
		client.SanlkRIndexDiff:
		return ErrCorrupt
	case client.SanlkAIOTimeout, client.SanlkDblockRead, client.SanlkDblockWrite,
		client.SanlkLeaderRead, client.SanlkLeaderWrite, client.SanlkAcquireIDDisk, -5:
		return ErrStorage
	case client.SanlkAcquireLVer, client.SanlkRequestOld, client.SanlkRequestLVer:
		return ErrVersion
	case client.SanlkHostIDBusy:
		return ErrHostIDBusy
	case client.RvEUCLEAN:
		return ErrOrphan
	case client.RvE2BIG, client.RvEINVAL, client.RvERANGE, client.SanlkAddLSInvalidHostID,
		client.RvEPERM, -6, client.RvENODEV, client.RvENOTCONN, client.RvELIBACC,
		client.RvELIBBAD, client.RvELIBSCN:
		return ErrInvalid
	case client.RvECONNREFUSED, client.RvESRCH, client.RvENOTTY, client.RvESTALE:
		return ErrDaemonUnavailable
	}
	return ErrDaemon
}

// retryable reports whether Acquire should try again after err: only the
// outcomes that mean "someone else has it now" (ErrLocked).
func retryable(err error) bool { return errors.Is(err, ErrLocked) }

// Error is a failed operation on a lease or session: the sentinel it
// matches (Kind), what it was about (the resource or lockspace, the file
// and offset of its lease, the daemon socket when the daemon could not be
// reached), and the underlying error (a *client.Error for daemon results,
// so errors.As still finds the code).
type Error struct {
	Op   string // "acquire", "release", "join", "register", "init", ...
	Name string // "lockspace:resource" or "lockspace" ("" for the session)
	// Path and Offset are the lease's place on storage ("" when the
	// operation has none).
	Path   string
	Offset uint64
	// Socket is the daemon socket, set when the error is about reaching
	// the daemon (Kind ErrDaemonUnavailable).
	Socket string
	Kind   error // one of the sentinels
	Err    error // underlying error
}

func (e *Error) Error() string {
	return "lease: " + subject(e.Op, e.Name, e.Path, e.Offset) + ": " + e.detail()
}

// detail is the message without the "lease: op name" prefix.
func (e *Error) detail() string {
	if e.Kind == ErrDaemonUnavailable && e.Socket != "" {
		return fmt.Sprintf("no daemon at %s (is sanlock running?): %s", e.Socket, cause(e.Err))
	}
	if ce, ok := e.Err.(*client.Error); ok && e.Kind == ErrLockspaceNotJoined && e.Op != "join" {
		// The errno's own text ("no space left on device") says
		// nothing here.
		ls, _, _ := strings.Cut(e.Name, ":")
		return fmt.Sprintf("lockspace %s is not joined on this host (%d %s)", ls, ce.Code, client.CodeName(ce.Code))
	}
	return cause(e.Err)
}

// subject names what an operation was about: "acquire LS:R1 at
// /dev/shared/leases:1048576".
func subject(op, name, path string, offset uint64) string {
	s := op
	if name != "" {
		s += " " + name
	}
	if path != "" {
		s += fmt.Sprintf(" at %s:%d", path, offset)
	}
	return s
}

// cause renders an underlying error without repeating a prefix that the
// caller prints already: daemon results as their text, number and name.
func cause(err error) string {
	var d interface{ detail() string }
	if errors.As(err, &d) {
		return d.detail()
	}
	if ce, ok := err.(*client.Error); ok {
		return codeText(ce.Code)
	}
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// codeText is "file exists (-17 EEXIST)".
func codeText(code int) string {
	if n := client.CodeName(code); n != "" {
		return fmt.Sprintf("%s (%d %s)", client.Strerror(code), code, n)
	}
	return fmt.Sprintf("%s (%d)", client.Strerror(code), code)
}

// Is matches the sentinel.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// wrap turns a client error into an *Error; nil stays nil, context errors
// and *Error values pass through.
func wrap(op, name string, err error) error {
	if err == nil {
		return nil
	}
	var le *Error
	if errors.As(err, &le) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var ce *client.Error
	if errors.As(err, &ce) {
		kind := Classify(op, ce.Code)
		if ce.Code == client.RvENOENT && (op == "join" || op == "register" || op == "") {
			kind = ErrDaemonUnavailable // no socket file
		}
		if op == "register" && ce.Code == client.RvECONNREFUSED {
			kind = ErrDaemonUnavailable
		}
		return &Error{Op: op, Name: name, Kind: kind, Err: err}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) {
		return &Error{Op: op, Name: name, Kind: ErrDaemonUnavailable, Err: err}
	}
	return &Error{Op: op, Name: name, Kind: ErrDaemon, Err: err}
}

// waitError is the error of a blocking Acquire whose context ended: it
// matches the context's error and, when there was one, the last
// attempt's (ErrLocked, *LockedError).
type waitError struct {
	subject string
	ctx     error
	last    error
}

func (e *waitError) Error() string {
	if e.last == nil {
		return "lease: " + e.subject + ": " + e.ctx.Error()
	}
	return "lease: " + e.subject + ": " + e.ctx.Error() + " (last attempt: " + cause(e.last) + ")"
}

// Unwrap returns the context's error and the last attempt's.
func (e *waitError) Unwrap() []error {
	if e.last == nil {
		return []error{e.ctx}
	}
	return []error{e.ctx, e.last}
}

// LockedError is what TryAcquire returns when the lease is held (and what
// a blocking Acquire's last attempt was, when its context ended): it
// matches ErrLocked and tells who holds it, as far as the daemon knows.
type LockedError struct {
	Name string // "lockspace:resource"
	// Path and Offset are the lease's place on storage.
	Path   string
	Offset uint64
	// Pid is the process of this host that holds the lease (0 when the
	// holder is not on this host, or unknown).
	Pid int
	// OwnerHostID and OwnerGeneration identify the holding host (0 when
	// unknown, e.g. only shared holders or a ballot in progress).
	OwnerHostID     uint64
	OwnerGeneration uint64
	// OwnerName is the holding host's name from its lockspace lease ("" when
	// unknown).
	OwnerName string
	// OwnerState is the holding host's state as this host's daemon sees
	// it: "live", "fail" (it has stopped renewing its lockspace lease; its
	// leases can be taken over once that lease has timed out), "dead"
	// (they can be taken over now), "free" or "unknown" ("" when not
	// known).
	OwnerState string
	// Err is the daemon's answer (a *client.Error).
	Err error
}

func (e *LockedError) Error() string {
	s := "lease: " + e.Name
	if e.Path != "" {
		s += fmt.Sprintf(" at %s:%d", e.Path, e.Offset)
	}
	return s + " is " + e.detail()
}

// detail is "held by ...: daemon's answer", without the lease's name and
// place.
func (e *LockedError) detail() string {
	who := "another owner"
	switch {
	case e.Pid != 0:
		who = fmt.Sprintf("process %d on this host", e.Pid)
		if e.OwnerHostID != 0 {
			who += fmt.Sprintf(" (host_id %d generation %d)", e.OwnerHostID, e.OwnerGeneration)
		}
	case e.OwnerHostID != 0:
		who = fmt.Sprintf("host_id %d generation %d", e.OwnerHostID, e.OwnerGeneration)
		if e.OwnerName != "" {
			who += fmt.Sprintf(" (%s)", e.OwnerName)
		}
		switch e.OwnerState {
		case "fail":
			who += ", which has stopped renewing (taken over once its lease has timed out)"
		case "dead":
			who += ", which is dead (taken over at the next attempt)"
		}
	}
	return "held by " + who + ": " + cause(e.Err)
}

// Is matches ErrLocked.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// Unwrap returns the daemon's answer.
func (e *LockedError) Unwrap() error { return e.Err }

// Reason says why a lease was lost.
type Reason int

// Reasons for a loss.
const (
	// ReasonLockspaceFailed: this host could not renew its lockspace lease
	// in time (storage failed or hung); other hosts will consider it dead
	// and take its leases.
	ReasonLockspaceFailed Reason = iota + 1
	// ReasonLockspaceRemoved: the lockspace was removed (rem_lockspace).
	ReasonLockspaceRemoved
	// ReasonRequested: a graceful REQUEST asked for the lease: a process
	// of another host, or of this one (sanlock client request), wants it.
	ReasonRequested
	// ReasonDaemonGone: the daemon closed the registered connection (it
	// exited or crashed); it no longer renews anything for this process.
	ReasonDaemonGone
	// ReasonSessionClosed: Session.Close was called while it was held.
	ReasonSessionClosed
)

func (r Reason) String() string {
	switch r {
	case ReasonLockspaceFailed:
		return "lockspace failed"
	case ReasonLockspaceRemoved:
		return "lockspace removed"
	case ReasonRequested:
		return "requested (a graceful request asked for it)"
	case ReasonDaemonGone:
		return "daemon gone"
	case ReasonSessionClosed:
		return "session closed"
	}
	return fmt.Sprintf("reason(%d)", int(r))
}

// LostError is the error of a lost lease (Lease.Err): it matches ErrLost.
type LostError struct {
	Name   string // "lockspace:resource"
	Token  uint64 // the token the lease had
	Reason Reason
	// RequestedBy is, for ReasonRequested, the host_id of the host that
	// asked, when its lockspace lease shows it (0: unknown, or a request
	// made on this host).
	RequestedBy uint64
}

func (e *LostError) Error() string {
	if e.Reason == ReasonRequested && e.RequestedBy != 0 {
		return fmt.Sprintf("lease: %s (token %d) lost: requested by host_id %d", e.Name, e.Token, e.RequestedBy)
	}
	return fmt.Sprintf("lease: %s (token %d) lost: %s", e.Name, e.Token, e.Reason)
}

// Is matches ErrLost.
func (e *LostError) Is(target error) bool { return target == ErrLost }
