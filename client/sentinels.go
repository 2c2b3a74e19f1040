package client

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
