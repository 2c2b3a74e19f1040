package diskfmt

import "github.com/gosanlock/gosanlock/rescode"

// The result codes moved to package rescode. The names below remain only for
// daemon/ and cmd/internal/cli until the manager split; use rescode.

// Code is rescode.Code.
//
// Deprecated: transitional alias, removed after the manager split.
type Code = rescode.Code

// CodeOf is rescode.CodeOf.
//
// Deprecated: transitional alias, removed after the manager split.
func CodeOf(err error) rescode.Code { return rescode.CodeOf(err) }

// ErrIOTimeout is rescode.ErrIOTimeout.
//
// Deprecated: transitional alias, removed after the manager split.
var ErrIOTimeout = rescode.ErrIOTimeout

// Result codes, as in rescode.
//
// Deprecated: transitional alias, removed after the manager split.
const (
	ErrAIOTimeout         = rescode.ErrAIOTimeout
	ErrAcquireIDLive      = rescode.ErrAcquireIDLive
	ErrAcquireLockspace   = rescode.ErrAcquireLockspace
	ErrAddLSInvalidHostID = rescode.ErrAddLSInvalidHostID
	ErrEINVAL             = rescode.ErrEINVAL
	ErrEIO                = rescode.ErrEIO
	ErrENODEV             = rescode.ErrENODEV
	ErrENOENT             = rescode.ErrENOENT
	ErrEPERM              = rescode.ErrEPERM
	ErrGeneric            = rescode.ErrGeneric
	ErrLeaderDiff         = rescode.ErrLeaderDiff
	ErrLeaderMagic        = rescode.ErrLeaderMagic
	ErrLeaderRead         = rescode.ErrLeaderRead
	ErrLeaderVersion      = rescode.ErrLeaderVersion
	ErrLeaderWrite        = rescode.ErrLeaderWrite
	ErrRindexOffset       = rescode.ErrRindexOffset
	ErrWatchdog           = rescode.ErrWatchdog
	OK                    = rescode.OK
)
