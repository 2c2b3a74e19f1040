package client

import "github.com/gosanlock/gosanlock/rescode"

// The result codes are defined once, in package rescode; the names below
// re-export them for users of this package (docs/protocol.md "Result codes").

// Errno results used on the wire, as they appear in data.
const (
	RvEPERM        = rescode.RvEPERM
	RvENOENT       = rescode.RvENOENT
	RvESRCH        = rescode.RvESRCH
	RvE2BIG        = rescode.RvE2BIG
	RvEAGAIN       = rescode.RvEAGAIN
	RvENOMEM       = rescode.RvENOMEM
	RvEBUSY        = rescode.RvEBUSY
	RvEEXIST       = rescode.RvEEXIST
	RvENODEV       = rescode.RvENODEV
	RvEINVAL       = rescode.RvEINVAL
	RvENOTTY       = rescode.RvENOTTY
	RvENOSPC       = rescode.RvENOSPC
	RvERANGE       = rescode.RvERANGE
	RvENOCSI       = rescode.RvENOCSI
	RvELIBACC      = rescode.RvELIBACC
	RvELIBBAD      = rescode.RvELIBBAD
	RvELIBSCN      = rescode.RvELIBSCN
	RvENOTCONN     = rescode.RvENOTCONN
	RvECONNREFUSED = rescode.RvECONNREFUSED
	RvEALREADY     = rescode.RvEALREADY
	RvEINPROGRESS  = rescode.RvEINPROGRESS
	RvESTALE       = rescode.RvESTALE
	RvEUCLEAN      = rescode.RvEUCLEAN
)

// sanlock result codes.
const (
	SanlkOK                 = int(rescode.OK)
	SanlkError              = int(rescode.ErrGeneric)
	SanlkAIOTimeout         = int(rescode.ErrAIOTimeout)
	SanlkWDError            = int(rescode.ErrWatchdog)
	SanlkDblockRead         = int(rescode.ErrDblockRead)
	SanlkDblockWrite        = int(rescode.ErrDblockWrite)
	SanlkDblockLVer         = int(rescode.ErrDblockLver)
	SanlkDblockMbal         = int(rescode.ErrDblockMbal)
	SanlkDblockChecksum     = int(rescode.ErrDblockChecksum)
	SanlkLeaderRead         = int(rescode.ErrLeaderRead)
	SanlkLeaderWrite        = int(rescode.ErrLeaderWrite)
	SanlkLeaderDiff         = int(rescode.ErrLeaderDiff)
	SanlkLeaderMagic        = int(rescode.ErrLeaderMagic)
	SanlkLeaderVersion      = int(rescode.ErrLeaderVersion)
	SanlkLeaderSectorSize   = int(rescode.ErrLeaderSectorSize)
	SanlkLeaderLockspace    = int(rescode.ErrLeaderLockspace)
	SanlkLeaderResource     = int(rescode.ErrLeaderResource)
	SanlkLeaderNumHosts     = int(rescode.ErrLeaderNumHosts)
	SanlkLeaderChecksum     = int(rescode.ErrLeaderChecksum)
	SanlkAddLSSizes         = int(rescode.ErrAddLSSizes)
	SanlkAddLSInvalidHostID = int(rescode.ErrAddLSInvalidHostID)
	SanlkAcquireLVer        = int(rescode.ErrAcquireLver)
	SanlkAcquireLockspace   = int(rescode.ErrAcquireLockspace)
	SanlkAcquireIDDisk      = int(rescode.ErrAcquireIDDisk)
	SanlkAcquireIDLive      = int(rescode.ErrAcquireIDLive)
	SanlkAcquireOwned       = int(rescode.ErrAcquireOwned)
	SanlkAcquireOther       = int(rescode.ErrAcquireOther)
	SanlkAcquireShRetry     = int(rescode.ErrAcquireShRetry)
	SanlkAcquireOwnedRetry  = int(rescode.ErrAcquireOwnedRetry)
	SanlkReleaseLVer        = int(rescode.ErrReleaseLver)
	SanlkReleaseOwner       = int(rescode.ErrReleaseOwner)
	SanlkReleaseLVer5       = int(rescode.ErrReleaseLver5)  // -252: SanlkReleaseLVer as 5.x numbers it
	SanlkReleaseOwner5      = int(rescode.ErrReleaseOwner5) // -253: SanlkReleaseOwner as 5.x numbers it
	SanlkRenewOwner         = int(rescode.ErrRenewOwner)
	SanlkRenewDiff          = int(rescode.ErrRenewDiff)
	SanlkHostIDBusy         = int(rescode.ErrHostIDBusy)
	SanlkRequestMagic       = int(rescode.ErrRequestMagic)
	SanlkRequestVersion     = int(rescode.ErrRequestVersion)
	SanlkRequestOld         = int(rescode.ErrRequestOld)
	SanlkRequestLVer        = int(rescode.ErrRequestLver)
	SanlkRIndexMagic        = int(rescode.ErrRindexMagic)
	SanlkRIndexVersion      = int(rescode.ErrRindexVersion)
	SanlkRIndexLockspace    = int(rescode.ErrRindexLockspace)
	SanlkRIndexOffset       = int(rescode.ErrRindexOffset)
	SanlkRIndexDiff         = int(rescode.ErrRindexDiff)
)

// CodeName returns the symbolic name of a result code ("SANLK_LEADER_MAGIC",
// "ENOENT"), or "" when unknown.
func CodeName(code int) string { return rescode.CodeName(code) }

// Strerror returns the text for a result code: the sanlock_strerror text for
// sanlock codes (docs/protocol.md "Result codes") and the Linux strerror text for -errno values.
func Strerror(code int) string { return rescode.Strerror(code) }

// Error is a negative result code returned by the daemon (or a connection
// failure mapped to -errno, as libsanlock does). errors.Is(err, syscall.ENOENT)
// matches an *Error{Code: -2}, and two *Error values match when their codes
// are equal.
type Error = rescode.Error

// resultErr converts a wire result into an error (nil for >= 0).
func resultErr(rv int32) error { return rescode.ResultErr(rv) }

// ErrorCode extracts the result code from err: the Code of an *Error, -errno
// for a syscall.Errno, -1 (EPERM, libsanlock's generic failure) for others,
// 0 for nil.
func ErrorCode(err error) int { return rescode.ErrorCode(err) }

// Sentinel errors, one per result code the daemons send (docs/protocol.md
// "Result codes"). A reply with that code matches with errors.Is:
//
//	if errors.Is(err, client.ErrAcquireIDLive) { /* owner's host is alive */ }
//
// They are *Error values, so errors.As(err, &e) with e *Error also works and
// gives the code. Compare with errors.Is, never with ==: replies carry their
// own *Error.
var (
	ErrGeneric            = &Error{Code: SanlkError}
	ErrAIOTimeout         = &Error{Code: SanlkAIOTimeout}
	ErrWatchdog           = &Error{Code: SanlkWDError}
	ErrDblockRead         = &Error{Code: SanlkDblockRead}
	ErrDblockWrite        = &Error{Code: SanlkDblockWrite}
	ErrDblockLVer         = &Error{Code: SanlkDblockLVer}
	ErrDblockMbal         = &Error{Code: SanlkDblockMbal}
	ErrDblockChecksum     = &Error{Code: SanlkDblockChecksum}
	ErrLeaderRead         = &Error{Code: SanlkLeaderRead}
	ErrLeaderWrite        = &Error{Code: SanlkLeaderWrite}
	ErrLeaderDiff         = &Error{Code: SanlkLeaderDiff}
	ErrLeaderMagic        = &Error{Code: SanlkLeaderMagic}
	ErrLeaderVersion      = &Error{Code: SanlkLeaderVersion}
	ErrLeaderSectorSize   = &Error{Code: SanlkLeaderSectorSize}
	ErrLeaderLockspace    = &Error{Code: SanlkLeaderLockspace}
	ErrLeaderResource     = &Error{Code: SanlkLeaderResource}
	ErrLeaderNumHosts     = &Error{Code: SanlkLeaderNumHosts}
	ErrLeaderChecksum     = &Error{Code: SanlkLeaderChecksum}
	ErrAddLSSizes         = &Error{Code: SanlkAddLSSizes}
	ErrAddLSInvalidHostID = &Error{Code: SanlkAddLSInvalidHostID}
	ErrAcquireLVer        = &Error{Code: SanlkAcquireLVer}
	ErrAcquireLockspace   = &Error{Code: SanlkAcquireLockspace}
	ErrAcquireIDDisk      = &Error{Code: SanlkAcquireIDDisk}
	ErrAcquireIDLive      = &Error{Code: SanlkAcquireIDLive}
	ErrAcquireOwned       = &Error{Code: SanlkAcquireOwned}
	ErrAcquireOther       = &Error{Code: SanlkAcquireOther}
	ErrAcquireShRetry     = &Error{Code: SanlkAcquireShRetry}
	ErrAcquireOwnedRetry  = &Error{Code: SanlkAcquireOwnedRetry}
	ErrReleaseLVer        = &Error{Code: SanlkReleaseLVer}
	ErrReleaseOwner       = &Error{Code: SanlkReleaseOwner}
	ErrReleaseLVer5       = &Error{Code: SanlkReleaseLVer5}
	ErrReleaseOwner5      = &Error{Code: SanlkReleaseOwner5}
	ErrRenewOwner         = &Error{Code: SanlkRenewOwner}
	ErrRenewDiff          = &Error{Code: SanlkRenewDiff}
	ErrHostIDBusy         = &Error{Code: SanlkHostIDBusy}
	ErrRequestMagic       = &Error{Code: SanlkRequestMagic}
	ErrRequestVersion     = &Error{Code: SanlkRequestVersion}
	ErrRequestOld         = &Error{Code: SanlkRequestOld}
	ErrRequestLVer        = &Error{Code: SanlkRequestLVer}
	ErrRIndexMagic        = &Error{Code: SanlkRIndexMagic}
	ErrRIndexVersion      = &Error{Code: SanlkRIndexVersion}
	ErrRIndexLockspace    = &Error{Code: SanlkRIndexLockspace}
	ErrRIndexOffset       = &Error{Code: SanlkRIndexOffset}
	ErrRIndexDiff         = &Error{Code: SanlkRIndexDiff}

	// errno results, named after what they mean on the wire.
	ErrNotPermitted     = &Error{Code: RvEPERM}        // -1
	ErrNotFound         = &Error{Code: RvENOENT}       // -2: no such lockspace / lease / daemon socket
	ErrNoSuchPID        = &Error{Code: RvESRCH}        // -3: target pid not registered
	ErrTooManyResources = &Error{Code: RvE2BIG}        // -7
	ErrAgain            = &Error{Code: RvEAGAIN}       // -11: try again (shared holders, local release)
	ErrNoMemory         = &Error{Code: RvENOMEM}       // -12
	ErrBusy             = &Error{Code: RvEBUSY}        // -16: busy with another command or acquire
	ErrExists           = &Error{Code: RvEEXIST}       // -17: already held / already joined
	ErrNoDevice         = &Error{Code: RvENODEV}       // -19
	ErrInvalid          = &Error{Code: RvEINVAL}       // -22
	ErrPIDDied          = &Error{Code: RvENOTTY}       // -25: pid died during the command
	ErrNoLockspace      = &Error{Code: RvENOSPC}       // -28: lockspace not joined or failing
	ErrRange            = &Error{Code: RvERANGE}       // -34
	ErrShortPayload     = &Error{Code: RvENOTCONN}     // -107
	ErrRefused          = &Error{Code: RvECONNREFUSED} // -111: no daemon listening
	ErrAlready          = &Error{Code: RvEALREADY}     // -114
	ErrInProgress       = &Error{Code: RvEINPROGRESS}  // -115: lockspace being added or removed
	ErrStale            = &Error{Code: RvESTALE}       // -116
	ErrOrphanExists     = &Error{Code: RvEUCLEAN}      // -117
)
