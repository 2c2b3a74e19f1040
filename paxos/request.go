package paxos

import (
	"context"
	"fmt"
	"syscall"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/rescode"
	"github.com/gosanlock/gosanlock/wire"
)

// RequestResult is what a request did.
type RequestResult struct {
	// Owner is the host_id to notify through the lockspace bitmap (0 for
	// none: a clear request, or a free lease).
	Owner uint64
	// Lver is the lver written (after SANLK_REQUEST_NEXT_LVER).
	Lver uint64
	// Written reports whether the request record was written.
	Written bool
}

// DecideRequest is the requester's check of the leader (docs/paxos.md "Request" step
// 2). It returns the owner to notify and the lver to request; owner 0 with
// no error means the lease is free and nothing is to be written.
func DecideRequest(ld *diskfmt.Leader, lver uint64, nextLver bool) (owner, reqLver uint64, err error) {
	if ld.Timestamp == 0 {
		return 0, lver, nil
	}
	if lver == 0 && nextLver {
		lver = ld.Lver + 1
	}
	if ld.Lver >= lver {
		return 0, lver, rescode.ErrRequestOld
	}
	return ld.OwnerID, lver, nil
}

// Request asks the owner of the lease to give it up (docs/paxos.md "Request"): it
// writes the request record (sector 1, disk 0) with lver and forceMode
// (0, diskfmt.ReqForce, diskfmt.ReqGraceful). lver 0 with nextLver requests
// the next version; lver 0 with forceMode 0 clears the record. A free lease
// gets no request at all. The caller marks RequestResult.Owner in the
// lockspace bitmap.
func (l *Lease) Request(ctx context.Context, lver uint64, forceMode uint32, nextLver bool) (RequestResult, error) {
	if err := l.validate(); err != nil {
		return RequestResult{}, wrap("request", err, nil)
	}
	ss, _ := l.hints()
	clear := lver == 0 && forceMode == 0
	var res RequestResult
	if !clear {
		ld, err := l.leaderRead(ctx, ss)
		if err != nil {
			return res, wrap("request", err, nil)
		}
		ss = int(ld.SectorSize)
		owner, reqLver, err := DecideRequest(&ld, lver, nextLver)
		if err != nil {
			return res, wrap("request", err, &ld)
		}
		if ld.Timestamp == 0 {
			return res, nil
		}
		res.Owner, lver = owner, reqLver
	}
	rec, err := l.readRequestRecord(ctx, ss)
	if err != nil {
		return RequestResult{}, wrap("request", err, nil)
	}
	if !clear && rec.Lver > lver {
		return RequestResult{}, wrap("request", rescode.ErrRequestLver, nil)
	}
	out := diskfmt.Request{Magic: rec.Magic, Version: diskfmt.RequestVersion, Lver: lver, ForceMode: forceMode}
	b := sectorBuf(ss)
	out.Encode(b)
	if err := l.write(ctx, 0, b, int64(ss)); err != nil {
		return RequestResult{}, wrap("request", ioErr(err, rescode.ErrEIO), nil)
	}
	res.Lver, res.Written = lver, true
	return res, nil
}

func (l *Lease) readRequestRecord(ctx context.Context, ss int) (diskfmt.Request, error) {
	b, err := l.read(ctx, 0, ss, int64(ss))
	if err != nil {
		return diskfmt.Request{}, ioErr(err, rescode.ErrEIO)
	}
	defer b.Release()
	return diskfmt.DecodeRequest(b.Bytes())
}

// ReadRequest reads the request record of a held lease (the owner's side
// of examine, docs/paxos.md "Examine" step 2).
func (r *Held) ReadRequest(ctx context.Context) (diskfmt.Request, error) {
	rec, err := r.lease.readRequestRecord(ctx, r.Geometry.SectorSize)
	return rec, wrap("examine", err, nil)
}

// ExamineAction is what the owner does about a request record.
type ExamineAction int

const (
	ExamineIgnore   ExamineAction = iota // nothing to do
	ExamineForce                         // SANLK_REQ_FORCE: kill the holder
	ExamineGraceful                      // SANLK_REQ_GRACEFUL: killpath or SIGTERM
)

// DecideExamine is the owner's decision on a request record (docs/paxos.md "Examine"
// step 2) for a resource held at heldLver by pid. Records that are invalid
// (recErr), cleared, older than or equal to our lver, or of an unknown mode
// are ignored. A pid of 0 or less (a shared resource has no single holder)
// is never acted on: signalling pid 0 would hit a whole process group.
func DecideExamine(rec diskfmt.Request, recErr error, heldLver uint64, pid int) ExamineAction {
	switch {
	case recErr != nil, rec.ForceMode == 0, rec.Lver == 0, rec.Lver <= heldLver, pid <= 0:
		return ExamineIgnore
	case rec.ForceMode == diskfmt.ReqForce:
		return ExamineForce
	case rec.ForceMode == diskfmt.ReqGraceful:
		return ExamineGraceful
	}
	return ExamineIgnore
}

// ExamineSignal maps an examine action to what the daemon does to the
// holder: a signal, or running the client's killpath (runKillpath, then
// sig is 0). The client's restrict flags (wire.Restrict*) swap SIGKILL and
// SIGTERM (wire.RestrictSignal).
func ExamineSignal(a ExamineAction, restrict uint32, hasKillpath bool) (sig syscall.Signal, runKillpath bool) {
	kill := wire.RestrictSignal(restrict, syscall.SIGKILL)
	term := wire.RestrictSignal(restrict, syscall.SIGTERM)
	switch a {
	case ExamineForce:
		return kill, false
	case ExamineGraceful:
		if hasKillpath {
			return 0, true
		}
		return term, false
	}
	return 0, false
}

// String names the action for logs.
func (a ExamineAction) String() string {
	switch a {
	case ExamineForce:
		return "force"
	case ExamineGraceful:
		return "graceful"
	}
	return fmt.Sprintf("ignore(%d)", int(a))
}
