package cli

import (
	"fmt"
	"strings"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
)

// The diagnostics a failed client action prints on stderr (docs/cli.md
// "Diagnostics on stderr"). Stdout keeps sanlock's lines ("X done -N");
// the line on stderr names the code and says what it means.

// codeExplanations says, per result code, what a failure with it means to
// an operator. Codes missing here fall back to their sanlock_strerror or
// strerror text.
var codeExplanations = map[rescode.Code]string{
	rescode.ErrEPERM:        "operation not permitted",
	rescode.ErrENOENT:       "not found: the daemon knows no such lockspace, resource or client",
	rescode.ErrESRCH:        "no such process: the pid is not registered with the daemon",
	rescode.ErrEIO:          "I/O error on the lease storage",
	rescode.ErrENXIO:        "no such device or address",
	rescode.ErrEAGAIN:       "the daemon is busy with this lockspace or lease: try again",
	rescode.ErrENOMEM:       "the daemon is out of memory or of lease slots",
	rescode.ErrEBUSY:        "busy: another request is changing this lockspace or lease, or the client is not registered",
	rescode.ErrEEXIST:       "already held or joined on this host: the lease by this or another local process, or the lockspace",
	rescode.ErrENODEV:       "no such device: the lease path could not be opened",
	rescode.ErrEINVAL:       fmt.Sprintf("invalid argument: check the names (at most %d bytes), the host_id, and that every offset is a multiple of the align size (1 MiB with 512-byte sectors)", diskfmt.NameLen),
	rescode.ErrENOSPC:       "lockspace not joined (run add_lockspace first), or no room for another lockspace or lease",
	rescode.ErrERANGE:       "out of range: the client holds the most leases it may",
	rescode.ErrENOSYS:       "the daemon does not support this request",
	rescode.ErrENOTCONN:     "not connected to the daemon",
	rescode.ErrECONNREFUSED: "the daemon refused the connection",
	rescode.ErrEALREADY:     "already in progress",
	rescode.ErrEINPROGRESS:  "in progress: the lockspace is still being joined or left",
	rescode.ErrESTALE:       "stale: the lease changed while it was read",

	rescode.ErrGeneric:            "the daemon failed the request (see its log)",
	rescode.ErrAIOTimeout:         "I/O to the lease storage timed out",
	rescode.ErrWatchdog:           "the watchdog could not be armed (is wdmd running?)",
	rescode.ErrDblockRead:         "reading a ballot block of the lease failed",
	rescode.ErrDblockWrite:        "writing a ballot block of the lease failed",
	rescode.ErrDblockLver:         "another host changed the lease version during the ballot",
	rescode.ErrDblockMbal:         "another host ran a higher ballot at the same time: the lease was not taken",
	rescode.ErrDblockChecksum:     "a ballot block of the lease has a bad checksum",
	rescode.ErrLeaderRead:         "reading the lease's leader record failed",
	rescode.ErrLeaderWrite:        "writing the lease's leader record failed",
	rescode.ErrLeaderDiff:         "the lease's leader record differs between disks",
	rescode.ErrLeaderMagic:        "no lease at this path and offset (not initialized, or a wrong offset)",
	rescode.ErrLeaderVersion:      "the lease was written by an incompatible version",
	rescode.ErrLeaderSectorSize:   "the lease's sector size does not match the storage",
	rescode.ErrLeaderLockspace:    "the lease at this offset belongs to another lockspace",
	rescode.ErrLeaderResource:     "the lease at this offset belongs to another resource",
	rescode.ErrLeaderNumHosts:     "the lease's host count does not fit the request",
	rescode.ErrLeaderChecksum:     "the lease's leader record has a bad checksum",
	rescode.ErrAddLSSizes:         "the lockspace's sector or align size does not match the request",
	rescode.ErrAddLSInvalidHostID: "the host_id is outside the lockspace's hosts",
	rescode.ErrAcquireLver:        "the lease's version is not the one requested",
	rescode.ErrAcquireLockspace:   "the lease's lockspace is not joined on this host",
	rescode.ErrAcquireIDDisk:      "held by another host (its host_id is on the lease)",
	rescode.ErrAcquireIDLive:      "held by another host, which is alive",
	rescode.ErrAcquireOwned:       "held by another host",
	rescode.ErrAcquireOther:       "another host is acquiring or holds the lease",
	rescode.ErrAcquireShRetry:     "shared holders are present: retry",
	rescode.ErrAcquireOwnedRetry:  "held by a host whose lease has not timed out yet: retry later",
	rescode.ErrAcquireOwnerGenRev: "the owner's generation went back",

	rescode.ErrAcquireOwnedNoTimeout: "held by a host that stopped renewing without a timeout: it is free only after set_host DEAD_EXT",
	rescode.ErrReleaseLver:           "the lease's version changed: it was not released",
	rescode.ErrReleaseOwner:          "this host does not own the lease",
	rescode.ErrReleaseLver5:          "the lease's version changed: it was not released",
	rescode.ErrReleaseOwner5:         "this host does not own the lease",
	rescode.ErrRenewOwner:            "another host took this host's delta lease",
	rescode.ErrRenewDiff:             "this host's delta lease changed on disk",
	rescode.ErrHostIDBusy:            "the host_id is in use by another host, which is renewing it",
	rescode.ErrDeadExt:               "another host marked this host dead (set_host DEAD_EXT)",
	rescode.ErrRequestMagic:          "no request record at this lease",
	rescode.ErrRequestVersion:        "the request record was written by an incompatible version",
	rescode.ErrRequestOld:            "the request is older than the lease",
	rescode.ErrRequestLver:           "the request names another lease version",
	rescode.ErrRindexMagic:           "no resource index at this path and offset",
	rescode.ErrRindexVersion:         "the resource index was written by an incompatible version",
	rescode.ErrRindexLockspace:       "the resource index belongs to another lockspace",
	rescode.ErrRindexOffset:          "the offset is not a resource slot of the index",
	rescode.ErrRindexDiff:            "the resource index and the lease disagree",
	rescode.ErrVersionIncompat:       "the daemon speaks an incompatible version",
	rescode.ErrWrongGeneration:       "the host's generation is not the one given",
}

// explain renders a failure code for an operator: "NAME (-N): text". The
// text is cause when the daemon gave one, else the code's generic
// explanation.
func explain(code int, cause string) string {
	c := rescode.Code(code)
	text := cause
	if text == "" {
		text = codeExplanations[c]
	}
	if text == "" {
		text = strings.ToLower(c.Text())
	}
	return fmt.Sprintf("%s (%d): %s", codeName(code), code, text)
}

// codeName is the name of a result code ("ENODEV", "SANLK_LEADER_MAGIC"),
// or "error" for a code without one.
func codeName(code int) string {
	if n := rescode.Code(code).Name(); n != "" {
		return n
	}
	return "error"
}

// failLine is the stderr line of a failed action: "sanlock: ACTION
// failed: NAME (-N): text".
func failLine(action string, code int, cause string) string {
	return fmt.Sprintf("sanlock: %s failed: %s", action, explain(code, cause))
}
