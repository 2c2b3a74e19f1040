package manager

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/paxos"
	"github.com/gosanlock/gosanlock/rescode"
)

// CauseError is a failure the manager can explain: the result code sent
// on the wire and, for a person, what failed in plain words ("open
// /dev/x: no such file or directory", "lockspace LS is not joined").
// rescode.CodeOf finds the code through Unwrap; Cause reads the text.
type CauseError struct {
	Code  rescode.Code
	Cause string
}

func (e *CauseError) Error() string { return e.Cause + ": " + e.Code.Error() }

// Unwrap returns the Code.
func (e *CauseError) Unwrap() error { return e.Code }

// withCause is err's result code with cause attached (err unchanged when
// it is nil or cause is empty).
func withCause(err error, cause string) error {
	if err == nil || cause == "" {
		return err
	}
	return &CauseError{Code: rescode.CodeOf(err), Cause: cause}
}

// causeErr is code with cause attached.
func causeErr(code rescode.Code, cause string) error { return &CauseError{Code: code, Cause: cause} }

// Cause is the explanation an error of the manager carries: the text of
// its CauseError, "" when it has none.
func Cause(err error) string {
	var ce *CauseError
	if errors.As(err, &ce) {
		return ce.Cause
	}
	return ""
}

// plainCause is the detail of err without the result code's own text at
// its end ("offset 1000 is not a multiple of the 512-byte sector"), ""
// when err is nothing but a code. A paxos error gives its detail only.
func plainCause(err error) string {
	if err == nil {
		return ""
	}
	if c := Cause(err); c != "" {
		return c
	}
	var pe *paxos.Error
	if errors.As(err, &pe) {
		if pe.Err == nil {
			return ""
		}
		err = pe.Err
	}
	code := rescode.CodeOf(err)
	text := err.Error()
	if text == code.Error() {
		return ""
	}
	return strings.TrimSuffix(text, ": "+code.Error())
}

// orCode is cause, or the text of err's result code when cause is empty.
func orCode(cause string, err error) string {
	if cause != "" {
		return cause
	}
	return rescode.CodeOf(err).Text()
}

// openCause is a failed open of path in plain words: "open /x: no such
// file or directory".
func openCause(path string, err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + " " + pe.Path + ": " + pe.Err.Error()
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return "open " + path + ": " + en.Error()
	}
	var c rescode.Code
	if errors.As(err, &c) {
		return "open " + path + ": " + c.Text()
	}
	return "open " + path + ": " + err.Error()
}

// acquireCause is why the delta-lease acquire of an add failed (its
// result code), for the client. For a host_id in use it reads the lease
// again to name the live owner: its host name and generation, and how
// recently it renewed (it renewed after the acquire's first read, which
// was at the start of the add).
func (sp *space) acquireCause(code rescode.Code) string {
	switch code {
	case rescode.ErrHostIDBusy:
		m := sp.m
		age := int64((m.cfg.Clock.Now() - sp.addBegin) / time.Second)
		name, gen, ok := sp.readOwner()
		if !ok {
			return fmt.Sprintf("host_id %d is in use by another live host (its lease at %s was renewed less than %d s ago)",
				sp.ls.HostID, sp.disk(), age+1)
		}
		return fmt.Sprintf("host_id %d is in use by %s (generation %d), renewed less than %d s ago",
			sp.ls.HostID, name, gen, age+1)
	case rescode.ErrGeneric:
		return fmt.Sprintf("the join of lockspace %s was cancelled", sp.ls.Name)
	case rescode.ErrEINVAL:
		if ss := sp.sectorSize(); ss > 0 && sp.ls.Disk.Offset%uint64(ss) != 0 {
			return fmt.Sprintf("offset %d is not a multiple of the %d-byte sector of %s", sp.ls.Disk.Offset, ss,
				sp.ls.Disk.Path)
		}
	case rescode.ErrLeaderMagic:
		return fmt.Sprintf("no lockspace at %s: the delta lease of host_id %d is not initialised", sp.disk(), sp.ls.HostID)
	case rescode.ErrCAWOpen:
		return fmt.Sprintf("the delta lease of host_id %d at %s is marked for SCSI COMPARE AND WRITE (sanlock 5.x on a device "+
			"that has it), which this daemon does not do", sp.ls.HostID, sp.disk())
	case rescode.ErrLeaderLockspace:
		if name, ok := sp.readSpaceName(); ok {
			return fmt.Sprintf("the lease at %s belongs to lockspace %s, not %s", sp.disk(), name, sp.ls.Name)
		}
	}
	return fmt.Sprintf("the lease of host_id %d at %s: %s", sp.ls.HostID, sp.disk(), code.Text())
}

// sectorSize is the sector size of the lockspace's device, 0 when it
// cannot be opened.
func (sp *space) sectorSize() int {
	dev, err := sp.m.cfg.Open(sp.ls.Disk.Path)
	if err != nil {
		return 0
	}
	defer dev.Close()
	return dev.SectorSize()
}

// readSpaceName reads the lockspace name in the delta lease of our
// host_id, unverified (false when it cannot be read).
func (sp *space) readSpaceName() (string, bool) {
	l, ok := sp.readLease()
	if !ok {
		return "", false
	}
	return diskfmt.NameString(l.SpaceName[:]), true
}

// readLease reads the delta lease of our host_id without verifying it.
func (sp *space) readLease() (diskfmt.Leader, bool) {
	m := sp.m
	dev, err := m.cfg.Open(sp.ls.Disk.Path)
	if err != nil {
		return diskfmt.Leader{}, false
	}
	defer dev.Close()
	ctx, cancel := ioTimeoutCtx(m.baseContext(), sp.ioTimeoutNow())
	defer cancel()
	off := int64(sp.ls.Disk.Offset)
	g, err := deltaGeometry(ctx, dev, off, 0)
	if err != nil {
		return diskfmt.Leader{}, false
	}
	raw, err := diskfmt.ReadSector(ctx, dev, off+diskfmt.DeltaSectorOffset(sp.ls.HostID, g.SectorSize), g.SectorSize)
	if err != nil {
		return diskfmt.Leader{}, false
	}
	l, err := diskfmt.DecodeLeader(raw)
	return l, err == nil
}

// readOwner reads the delta lease of our host_id and returns its owner's
// host name and generation (false when it cannot be read or is not a
// lease of this lockspace).
func (sp *space) readOwner() (name string, gen uint64, ok bool) {
	l, ok := sp.readLease()
	if !ok || diskfmt.NameString(l.SpaceName[:]) != sp.ls.Name {
		return "", 0, false
	}
	name = diskfmt.NameString(l.ResourceName[:])
	if name == "" {
		name = fmt.Sprintf("host_id %d's owner", l.OwnerID)
	}
	return name, l.OwnerGeneration, true
}

// explain gives an acquire error its cause: the holder of a lease held by
// another host (its host_id, host name and generation, and when our
// lockspace last saw its host_id lease renewed), or the detail of the
// failure (a misaligned offset). err is returned unchanged when there is
// nothing to add.
func (m *Resources) explain(err error) error {
	if err == nil || Cause(err) != "" {
		return err
	}
	var se *spaceErr
	space := ""
	if errors.As(err, &se) {
		space = se.space
	}
	var pe *paxos.Error
	if errors.As(err, &pe) && pe.Leader != nil {
		switch pe.Code {
		case rescode.ErrAcquireIDLive, rescode.ErrAcquireOwnedNoTimeout, rescode.ErrAcquireOwned,
			rescode.ErrAcquireOther, rescode.ErrAcquireOwnedRetry:
			return withCause(err, m.holderCause(space, pe.Leader))
		}
	}
	if c := plainCause(err); c != "" && space != "" {
		return withCause(err, "lockspace "+space+": "+c)
	}
	return withCause(err, plainCause(err))
}

// holderCause names the owner of leader ld of a lease in lockspace space.
func (m *Resources) holderCause(space string, ld *diskfmt.Leader) string {
	text := fmt.Sprintf("held by host_id %d", ld.OwnerID)
	v, ok := m.spaces.(ownerAger)
	if !ok || space == "" {
		return fmt.Sprintf("%s (generation %d)", text, ld.OwnerGeneration)
	}
	name, age, seen := v.OwnerAge(space, ld.OwnerID)
	if name != "" {
		text += " (" + name + ")"
	}
	text += fmt.Sprintf(" generation %d", ld.OwnerGeneration)
	if seen {
		text += fmt.Sprintf(", its host_id lease renewed %d s ago", age)
	}
	return text
}

// ownerAger is what holderCause asks the lockspaces (Lockspaces).
type ownerAger interface {
	OwnerAge(space string, hostID uint64) (name string, age int64, seen bool)
}

// OwnerAge is host hostID of joined lockspace space as our renewals see
// it: its host name and the seconds since its lease last changed; seen is
// false when that has not been observed.
func (m *Lockspaces) OwnerAge(space string, hostID uint64) (name string, age int64, seen bool) {
	run, ok := m.Joined(space)
	if !ok {
		return "", 0, false
	}
	hs, ok := run.Host(hostID)
	if !ok {
		return "", 0, false
	}
	if hs.LastLive == 0 {
		return hs.OwnerName, 0, false
	}
	now := clock.Monotime(m.cfg.Clock)
	if now < hs.LastLive {
		return hs.OwnerName, 0, true
	}
	return hs.OwnerName, int64(now - hs.LastLive), true
}

// localCause says what this host is doing with resource r that refuses
// an acquire of it ("" when r is nil). Called with the Resources' mu.
func localCause(r *resource) string {
	if r == nil {
		return ""
	}
	pids := make([]string, 0, len(r.tokens))
	for _, tk := range r.tokens {
		pids = append(pids, strconv.Itoa(tk.pid))
	}
	by := ""
	switch len(pids) {
	case 0:
	case 1:
		by = " by pid " + pids[0]
	default:
		by = " by pids " + strings.Join(pids, ", ")
	}
	what := "resource " + r.key.space + ":" + r.key.name
	switch {
	case r.list == resRem:
		return what + " is being released on this host" + by
	case r.list == resAdd || r.converting:
		return what + " is being acquired on this host" + by
	case r.list == resOrphan:
		return what + " is held on this host by a process that has ended (an orphan lease)"
	case r.shared:
		return what + " is held shared on this host" + by
	}
	return what + " is held on this host" + by
}
