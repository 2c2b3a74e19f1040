// Package rescode holds sanlock's result codes, once: the numeric values
// (sanlock_rv.h's and -errno), their names and texts, the mapping of any Go
// error to a code (CodeOf), and the error a reply's negative result becomes
// (Error). The disk format, the algorithms, the manager, the wire codec and
// the client all speak these codes; they are part of the tools' output and of
// the wire protocol and must not change.
package rescode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"syscall"
)

// Code is a sanlock result value: 0 or positive for success, -errno (Linux
// numbering) or a sanlock code <= -200 for failure. These values are part of
// the on-disk tools' output and of the wire protocol and must not change.
type Code int

// sanlock result codes (the values of sanlock_rv.h).
const (
	OK                    Code = 1 // internal success marker, never sent
	ErrGeneric            Code = -201
	ErrAIOTimeout         Code = -202
	ErrWatchdog           Code = -203
	ErrDblockRead         Code = -210
	ErrDblockWrite        Code = -211
	ErrDblockLver         Code = -212
	ErrDblockMbal         Code = -213
	ErrDblockChecksum     Code = -214
	ErrLeaderRead         Code = -220
	ErrLeaderWrite        Code = -221
	ErrLeaderDiff         Code = -222
	ErrLeaderMagic        Code = -223
	ErrLeaderVersion      Code = -224
	ErrLeaderSectorSize   Code = -225
	ErrLeaderLockspace    Code = -226
	ErrLeaderResource     Code = -227
	ErrLeaderNumHosts     Code = -228
	ErrLeaderChecksum     Code = -229
	ErrAddLSSizes         Code = -230
	ErrAddLSInvalidHostID Code = -231
	ErrAcquireLver        Code = -240
	ErrAcquireLockspace   Code = -241
	ErrAcquireIDDisk      Code = -242
	ErrAcquireIDLive      Code = -243
	ErrAcquireOwned       Code = -244
	ErrAcquireOther       Code = -245
	ErrAcquireShRetry     Code = -246
	ErrAcquireOwnedRetry  Code = -247
	// ErrAcquireOwnedNoTimeout (sanlock 5.x): the owner's delta lease is
	// NO_TIMEOUT and it has stopped renewing (FAIL): it is never taken
	// over by time, only after set_host DEAD_EXT.
	ErrAcquireOwnedNoTimeout Code = -249
	ErrReleaseLver           Code = -250
	ErrReleaseOwner          Code = -251
	ErrRenewOwner            Code = -260
	ErrRenewDiff             Code = -261
	ErrHostIDBusy            Code = -262
	// ErrDeadExt (sanlock 5.x): the host's delta lease was marked dead by
	// another host (DEAD_EXT).
	ErrDeadExt         Code = -263
	ErrRequestMagic    Code = -270
	ErrRequestVersion  Code = -271
	ErrRequestOld      Code = -272
	ErrRequestLver     Code = -273
	ErrRindexMagic     Code = -274
	ErrRindexVersion   Code = -275
	ErrRindexLockspace Code = -276
	ErrRindexOffset    Code = -277
	ErrRindexDiff      Code = -278
	// ErrCAWOpen (sanlock 5.x) refuses a lease marked for SCSI COMPARE
	// AND WRITE where CAW cannot be used (5.1.1 answers it on files).
	ErrCAWOpen Code = -283

	// The other codes sanlock 5.x added. ErrReleaseLver5 and
	// ErrReleaseOwner5 are ErrReleaseLver and ErrReleaseOwner as 5.x
	// numbers them (docs/compat.md "Result codes").
	ErrVersionIncompat    Code = -204
	ErrAcquireOwnerGenRev Code = -248
	ErrReleaseLver5       Code = -252
	ErrReleaseOwner5      Code = -253
	ErrWrongGeneration    Code = -280
	ErrWrongCAW           Code = -281
	ErrCAWConfig          Code = -282
	ErrCAWIoctl           Code = -284
	ErrCAWMiscompare      Code = -285
	ErrCAWError           Code = -286
	ErrIOType             Code = -287
	ErrCAWIllegal         Code = -288
)

// Release5 maps the release codes of 3.x (-250, -251) to the numbers 5.x
// gives them (-252, -253); any other code is returned unchanged.
func Release5(c Code) Code {
	switch c {
	case ErrReleaseLver:
		return ErrReleaseLver5
	case ErrReleaseOwner:
		return ErrReleaseOwner5
	}
	return c
}

// Errno results as they appear on the wire and in the tools' output
// (-errno, Linux numbering), untyped so they fit any integer field.
const (
	RvEPERM        = -1
	RvENOENT       = -2
	RvESRCH        = -3
	RvEIO          = -5
	RvENXIO        = -6
	RvE2BIG        = -7
	RvEAGAIN       = -11
	RvENOMEM       = -12
	RvEBUSY        = -16
	RvEEXIST       = -17
	RvENODEV       = -19
	RvEINVAL       = -22
	RvENOTTY       = -25
	RvENOSPC       = -28
	RvERANGE       = -34
	RvENOSYS       = -38
	RvENOCSI       = -50
	RvELIBACC      = -79
	RvELIBBAD      = -80
	RvELIBSCN      = -81
	RvENOTCONN     = -107
	RvECONNREFUSED = -111
	RvEALREADY     = -114
	RvEINPROGRESS  = -115
	RvESTALE       = -116
	RvEUCLEAN      = -117
)

// The errno results as Codes.
const (
	ErrEPERM        Code = RvEPERM
	ErrENOENT       Code = RvENOENT
	ErrESRCH        Code = RvESRCH
	ErrEIO          Code = RvEIO
	ErrENXIO        Code = RvENXIO
	ErrE2BIG        Code = RvE2BIG
	ErrEAGAIN       Code = RvEAGAIN
	ErrENOMEM       Code = RvENOMEM
	ErrEBUSY        Code = RvEBUSY
	ErrEEXIST       Code = RvEEXIST
	ErrENODEV       Code = RvENODEV
	ErrEINVAL       Code = RvEINVAL
	ErrENOTTY       Code = RvENOTTY
	ErrENOSPC       Code = RvENOSPC
	ErrERANGE       Code = RvERANGE
	ErrENOSYS       Code = RvENOSYS
	ErrENOCSI       Code = RvENOCSI
	ErrELIBACC      Code = RvELIBACC
	ErrELIBBAD      Code = RvELIBBAD
	ErrELIBSCN      Code = RvELIBSCN
	ErrENOTCONN     Code = RvENOTCONN
	ErrECONNREFUSED Code = RvECONNREFUSED
	ErrEALREADY     Code = RvEALREADY
	ErrEINPROGRESS  Code = RvEINPROGRESS
	ErrESTALE       Code = RvESTALE
	ErrEUCLEAN      Code = RvEUCLEAN
)

// ErrIOTimeout is returned (wrapped) by a disk I/O (diskfmt.Device call)
// that outlived its context deadline; CodeOf maps it to ErrAIOTimeout.
var ErrIOTimeout = errors.New("disk I/O timed out")

type codeInfo struct{ name, text string }

var codeTable = map[Code]codeInfo{
	OK:                       {"SANLK_OK", "Unknown error"},
	ErrGeneric:               {"SANLK_ERROR", "General error"},
	ErrAIOTimeout:            {"SANLK_AIO_TIMEOUT", "IO timeout"},
	ErrWatchdog:              {"SANLK_WD_ERROR", "Watchdog device error"},
	ErrDblockRead:            {"SANLK_DBLOCK_READ", "Lease read error in dblock"},
	ErrDblockWrite:           {"SANLK_DBLOCK_WRITE", "Lease write error in dblock"},
	ErrDblockLver:            {"SANLK_DBLOCK_LVER", "Lease was acquired by another host in new ballot"},
	ErrDblockMbal:            {"SANLK_DBLOCK_MBAL", "Lease was acquired by another host in current ballot"},
	ErrDblockChecksum:        {"SANLK_DBLOCK_CHECKSUM", "Lease checksum error in dblock"},
	ErrLeaderRead:            {"SANLK_LEADER_READ", "Lease read error in leader"},
	ErrLeaderWrite:           {"SANLK_LEADER_WRITE", "Lease write error in leader"},
	ErrLeaderDiff:            {"SANLK_LEADER_DIFF", "Lease read inconsistent"},
	ErrLeaderMagic:           {"SANLK_LEADER_MAGIC", "Lease does not exist on storage"},
	ErrLeaderVersion:         {"SANLK_LEADER_VERSION", "Lease format version on storage is not recognized"},
	ErrLeaderSectorSize:      {"SANLK_LEADER_SECTORSIZE", "Lease sector size is inconsistent"},
	ErrLeaderLockspace:       {"SANLK_LEADER_LOCKSPACE", "Lease lockspace name is incorrect"},
	ErrLeaderResource:        {"SANLK_LEADER_RESOURCE", "Lease resource name is incorrect"},
	ErrLeaderNumHosts:        {"SANLK_LEADER_NUMHOSTS", "Lease num_hosts is incorrect"},
	ErrLeaderChecksum:        {"SANLK_LEADER_CHECKSUM", "Lease checksum error in leader"},
	ErrAddLSSizes:            {"SANLK_ADDLS_SIZES", "Unknown error"},
	ErrAddLSInvalidHostID:    {"SANLK_ADDLS_INVALID_HOSTID", "Unknown error"},
	ErrAcquireLver:           {"SANLK_ACQUIRE_LVER", "Unknown error"},
	ErrAcquireLockspace:      {"SANLK_ACQUIRE_LOCKSPACE", "Lease lockspace is not found"},
	ErrAcquireIDDisk:         {"SANLK_ACQUIRE_IDDISK", "Lease lockspace disk cannot be opened"},
	ErrAcquireIDLive:         {"SANLK_ACQUIRE_IDLIVE", "Lease is held by another host"},
	ErrAcquireOwned:          {"SANLK_ACQUIRE_OWNED", "Lease was acquired by another host in other ballot"},
	ErrAcquireOther:          {"SANLK_ACQUIRE_OTHER", "Lease was acquired by another host in local commit"},
	ErrAcquireShRetry:        {"SANLK_ACQUIRE_SHRETRY", "Lease is held by another host for shared acquire"},
	ErrAcquireOwnedRetry:     {"SANLK_ACQUIRE_OWNED_RETRY", "Lease is owned by another host"},
	ErrReleaseLver:           {"SANLK_RELEASE_LVER", "Lease release version is incorrect"},
	ErrReleaseOwner:          {"SANLK_RELEASE_OWNER", "Lease release owner is incorrect"},
	ErrRenewOwner:            {"SANLK_RENEW_OWNER", "Lease renew owner is incorrect"},
	ErrRenewDiff:             {"SANLK_RENEW_DIFF", "Lease renew data has changed"},
	ErrHostIDBusy:            {"SANLK_HOSTID_BUSY", "Lease host ID is being used by another host"},
	ErrRequestMagic:          {"SANLK_REQUEST_MAGIC", "Lease request block has invalid data"},
	ErrRequestVersion:        {"SANLK_REQUEST_VERSION", "Lease request block has invalid version"},
	ErrRequestOld:            {"SANLK_REQUEST_OLD", "Lease request has newer lease version"},
	ErrRequestLver:           {"SANLK_REQUEST_LVER", "Lease request block has newer version"},
	ErrRindexMagic:           {"SANLK_RINDEX_MAGIC", "Unknown error"},
	ErrRindexVersion:         {"SANLK_RINDEX_VERSION", "Unknown error"},
	ErrRindexLockspace:       {"SANLK_RINDEX_LOCKSPACE", "Unknown error"},
	ErrRindexOffset:          {"SANLK_RINDEX_OFFSET", "Unknown error"},
	ErrRindexDiff:            {"SANLK_RINDEX_DIFF", "Unknown error"},
	ErrCAWOpen:               {"SANLK_CAW_OPEN", "Unknown error"},
	ErrDeadExt:               {"SANLK_DEAD_EXT", "Unknown error"},
	ErrAcquireOwnedNoTimeout: {"SANLK_ACQUIRE_OWNED_NO_TIMEOUT", "Lease is owned by another notimeout host"}, // libsanlock 5.1.1's text
	ErrWrongGeneration:       {"SANLK_WRONG_GENERATION", "Unknown error"},
	ErrVersionIncompat:       {"SANLK_VERSION_INCOMPAT", "Unknown error"},
	ErrAcquireOwnerGenRev:    {"SANLK_ACQUIRE_OWNER_GEN_REVERTED", "Unknown error"},
	ErrReleaseLver5:          {"SANLK_RELEASE_LVER", "Lease release version is incorrect"},
	ErrReleaseOwner5:         {"SANLK_RELEASE_OWNER", "Lease release owner is incorrect"},
	ErrWrongCAW:              {"SANLK_WRONG_CAW", "Unknown error"},
	ErrCAWConfig:             {"SANLK_CAW_CONFIG", "Unknown error"},
	ErrCAWIoctl:              {"SANLK_CAW_IOCTL", "Unknown error"},
	ErrCAWMiscompare:         {"SANLK_CAW_MISCOMPARE", "Unknown error"},
	ErrCAWError:              {"SANLK_CAW_ERROR", "Unknown error"},
	ErrIOType:                {"SANLK_IOTYPE", "Unknown error"},
	ErrCAWIllegal:            {"SANLK_CAW_ILLEGAL", "Unknown error"},
}

// Name returns the sanlock constant name (e.g. "SANLK_LEADER_MAGIC"), or the
// errno name for -errno values, or "" when unknown.
func (c Code) Name() string {
	if i, ok := codeTable[c]; ok {
		return i.name
	}
	if c < 0 && c > -200 {
		if n := errnoName(syscall.Errno(-c)); n != "" {
			return n
		}
	}
	return ""
}

// Text is the human description of the code, as sanlock_strerror gives it
// for sanlock codes and strerror for -errno values.
func (c Code) Text() string {
	if i, ok := codeTable[c]; ok {
		return i.text
	}
	if c < 0 && c > -200 {
		return syscall.Errno(-c).Error()
	}
	return "Unknown error"
}

// Error implements error, so a Code can be returned directly.
func (c Code) Error() string {
	if n := c.Name(); n != "" {
		return fmt.Sprintf("%s (%d): %s", n, int(c), c.Text())
	}
	return fmt.Sprintf("result %d: %s", int(c), c.Text())
}

// LogString formats c for a log line: the number, then the name from the
// code table or the errno name, e.g. "-210 (SANLK_DBLOCK_READ)", "-5 (EIO)";
// just the number when the code has no name.
func (c Code) LogString() string {
	if n := c.Name(); n != "" {
		return fmt.Sprintf("%d (%s)", int(c), n)
	}
	return strconv.Itoa(int(c))
}

var errnoNames = map[syscall.Errno]string{
	syscall.EPERM: "EPERM", syscall.ENOENT: "ENOENT", syscall.ESRCH: "ESRCH", syscall.EIO: "EIO",
	syscall.ENXIO: "ENXIO", syscall.E2BIG: "E2BIG", syscall.EAGAIN: "EAGAIN", syscall.ENOMEM: "ENOMEM",
	syscall.EBUSY: "EBUSY", syscall.EEXIST: "EEXIST", syscall.ENODEV: "ENODEV", syscall.EINVAL: "EINVAL",
	syscall.ENOTTY: "ENOTTY", syscall.ENOSPC: "ENOSPC", syscall.ERANGE: "ERANGE", syscall.ENOSYS: "ENOSYS", syscall.ENOCSI: "ENOCSI",
	syscall.ELIBACC: "ELIBACC", syscall.ELIBBAD: "ELIBBAD", syscall.ELIBSCN: "ELIBSCN",
	syscall.ENOTCONN: "ENOTCONN", syscall.ECONNREFUSED: "ECONNREFUSED", syscall.EALREADY: "EALREADY",
	syscall.EINPROGRESS: "EINPROGRESS", syscall.ESTALE: "ESTALE", syscall.EUCLEAN: "EUCLEAN",
}

func errnoName(e syscall.Errno) string { return errnoNames[e] }

// CodeOf maps any error to the sanlock result value a tool or reply would
// carry: nil is 0, a Code is itself, an I/O timeout is SANLK_AIO_TIMEOUT, an
// errno is -errno, a short read/write is -EIO, anything else SANLK_ERROR.
func CodeOf(err error) Code {
	if err == nil {
		return 0
	}
	var c Code
	if errors.As(err, &c) {
		return c
	}
	if errors.Is(err, ErrIOTimeout) || errors.Is(err, context.DeadlineExceeded) {
		return ErrAIOTimeout
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return Code(-int(e))
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return ErrEIO
	}
	return ErrGeneric
}
