package wire

import (
	"errors"
	"fmt"
	"io"

	"github.com/gosanlock/gosanlock/rescode"
)

// DefaultMaxPayload bounds the length field ReadRequest accepts when the
// caller passes maxPayload <= 0. The largest legitimate payload is an ACQUIRE
// of 8 resources with 4 disks each (34424 bytes); SET_LVB may announce up to
// 128+4096.
const DefaultMaxPayload = 1 << 16

// Request is one client-to-daemon message: the header plus the decoded
// payload. Which fields are used depends on Header.Cmd (docs/protocol.md "Commands"):
//
//	Lockspace            ADD/REM/INQ/WRITE/READ_LOCKSPACE, EXAMINE_LOCKSPACE, HOST_STATUS,
//	                     GET_HOSTS, REG_EVENT, END_EVENT, SET_EVENT, SET_CONFIG, RENEWAL
//	HostEvent            REG_EVENT, SET_EVENT
//	Resources            ACQUIRE (N, with disks), RELEASE (N, no disks), REQUEST,
//	                     WRITE_RESOURCE, READ_RESOURCE, READ_RESOURCE_OWNERS (1, with disks),
//	                     EXAMINE_RESOURCE, SET_LVB, GET_LVB, CONVERT (1, no disks)
//	Options              ACQUIRE (nil encodes as all zero)
//	Disk                 ALIGN
//	Killpath             KILLPATH
//	RIndex               rindex commands 35..40
//	REntry               UPDATE/LOOKUP_RINDEX, CREATE/DELETE_RESOURCE
//	LVB                  SET_LVB
//	Host                 SET_HOST (with Lockspace)
//	DeltaLeader          INIT_LOCKSPACE_HOST (with Lockspace)
//
// ACQUIRE2 carries what ACQUIRE carries; READ_LOCKSPACE_HOST a Lockspace.
// Private commands (CmdReexec) carry nothing.
type Request struct {
	Header    Header
	Lockspace *Lockspace
	HostEvent *HostEvent
	Resources []Resource
	Options   *Options
	Disk      *Disk
	Killpath  *Killpath
	RIndex    *RIndex
	REntry    *REntry
	LVB       []byte
	Host      *Host
	// DeltaLeader is the 200-byte delta lease record of
	// INIT_LOCKSPACE_HOST, as the client sent it.
	DeltaLeader []byte

	// Consumed is the number of payload bytes ReadRequest read after the
	// header (used by Drain).
	Consumed int
}

// NewRequest returns a request with a libsanlock-style header.
func NewRequest(cmd Cmd, cmdFlags, data, data2 uint32) *Request {
	return &Request{Header: NewHeader(cmd, cmdFlags, data, data2)}
}

// payloadKind describes what follows the header for each command.
type payloadKind int

const (
	plNone            payloadKind = iota
	plLockspace                   // sanlk_lockspace
	plLockspaceEvent              // sanlk_lockspace + sanlk_host_event
	plAcquire                     // N x (res + disks) + options
	plRelease                     // N x res (REL_ALL: none, ORPHAN: 1, RENAME: 2)
	plResDisks                    // res + disks
	plRes                         // res (no disks)
	plResLVB                      // res + lvb (length-derived)
	plDisk                        // sanlk_disk
	plKillpath                    // 256 bytes
	plRIndex                      // sanlk_rindex
	plRIndexEntry                 // sanlk_rindex + sanlk_rentry
	plLockspaceShort              // sanlk_lockspace, but length says 32
	plRIndexEntryLong             // rindex + rentry, length says 32+1104+128
	plLockspaceHost               // sanlk_lockspace + sanlk_host
	plLockspaceLeader             // sanlk_lockspace + 200-byte delta leader record
)

// DeltaLeaderSize is the size of the delta lease record that
// INIT_LOCKSPACE_HOST carries.
const DeltaLeaderSize = 200

var requestPayload = [...]payloadKind{
	CmdRegister:           plNone,
	CmdAddLockspace:       plLockspace,
	CmdRemLockspace:       plLockspace,
	CmdShutdown:           plNone,
	CmdStatus:             plNone,
	CmdLogDump:            plNone,
	CmdAcquire:            plAcquire,
	CmdRelease:            plRelease,
	CmdInquire:            plNone,
	CmdRestrict:           plNone,
	CmdRequest:            plResDisks,
	CmdAlign:              plDisk,
	CmdExamineLockspace:   plLockspace,
	CmdExamineResource:    plRes,
	CmdHostStatus:         plLockspaceShort,
	CmdInqLockspace:       plLockspace,
	CmdKillpath:           plKillpath,
	CmdWriteLockspace:     plLockspace,
	CmdWriteResource:      plResDisks,
	CmdReadLockspace:      plLockspace,
	CmdReadResource:       plResDisks,
	CmdGetLockspaces:      plNone,
	CmdGetHosts:           plLockspace,
	CmdReadResourceOwners: plResDisks,
	CmdSetLVB:             plResLVB,
	CmdGetLVB:             plRes,
	CmdConvert:            plRes,
	CmdVersion:            plNone,
	CmdShutdownWait:       plNone,
	CmdRegEvent:           plLockspaceEvent,
	CmdEndEvent:           plLockspace,
	CmdSetEvent:           plLockspaceEvent,
	CmdSetConfig:          plLockspace,
	CmdRenewal:            plLockspaceShort,
	CmdFormatRIndex:       plRIndex,
	CmdUpdateRIndex:       plRIndexEntry,
	CmdLookupRIndex:       plRIndexEntryLong,
	CmdCreateResource:     plRIndexEntry,
	CmdDeleteResource:     plRIndexEntry,
	CmdRebuildRIndex:      plRIndex,
	CmdAcquire2:           plAcquire,
	CmdReadLockspaceHost:  plLockspace,
	CmdInitLockspaceHost:  plLockspaceLeader,
	CmdSetHost:            plLockspaceHost,
}

// payloadOf is the payload of a request of a valid command c; private
// commands carry none.
func payloadOf(c Cmd) payloadKind {
	if c.Sanlock() {
		return requestPayload[c]
	}
	return plNone
}

// releaseCount returns how many sanlk_resource a RELEASE carries.
func releaseCount(h Header) uint32 {
	switch {
	case h.CmdFlags&RelAll != 0:
		return 0
	case h.CmdFlags&RelOrphan != 0:
		return 1
	case h.CmdFlags&RelRename != 0:
		return 2
	}
	return h.Data
}

func (q *Request) lockspace() *Lockspace {
	if q.Lockspace != nil {
		return q.Lockspace
	}
	return &Lockspace{}
}

func (q *Request) res(i int) (*Resource, error) {
	if i >= len(q.Resources) {
		return nil, fmt.Errorf("sanlock proto: %s needs %d resource(s), have %d", q.Header.Cmd, i+1, len(q.Resources))
	}
	return &q.Resources[i], nil
}

// MarshalBinary encodes the request as libsanlock does: header, then the
// payload of the command, with Header.Length set to libsanlock's value
// (including the HOST_STATUS/RENEWAL and LOOKUP_RINDEX quirks, docs/protocol.md "Header").
// For ACQUIRE and RELEASE, Header.Data is set to len(Resources) unless a
// special RELEASE flag decides the count. Magic/Version are taken as set
// (NewRequest fills them).
func (q *Request) MarshalBinary() ([]byte, error) {
	h := q.Header
	if !h.Cmd.Valid() {
		return nil, ErrUnknownCmd
	}
	b := make([]byte, HeaderSize, HeaderSize+LockspaceSize+HostEventSize)
	var err error
	switch payloadOf(h.Cmd) {
	case plNone:
	case plLockspace, plLockspaceShort:
		b, err = q.lockspace().AppendBinary(b)
	case plLockspaceHost:
		if b, err = q.lockspace().AppendBinary(b); err == nil {
			host := q.Host
			if host == nil {
				host = &Host{}
			}
			b, err = host.AppendBinary(b)
		}
	case plLockspaceLeader:
		if len(q.DeltaLeader) > DeltaLeaderSize {
			return nil, ErrLength
		}
		if b, err = q.lockspace().AppendBinary(b); err == nil {
			var rec [DeltaLeaderSize]byte
			copy(rec[:], q.DeltaLeader)
			b = append(b, rec[:]...)
		}
	case plLockspaceEvent:
		if b, err = q.lockspace().AppendBinary(b); err == nil {
			he := q.HostEvent
			if he == nil {
				he = &HostEvent{}
			}
			b, err = he.AppendBinary(b)
		}
	case plAcquire:
		if len(q.Resources) > MaxResources {
			return nil, ErrTooMany
		}
		h.Data = uint32(len(q.Resources))
		for i := range q.Resources {
			if b, err = q.Resources[i].AppendWithDisks(b); err != nil {
				return nil, err
			}
		}
		opt := q.Options
		if opt == nil {
			opt = &Options{}
		}
		b, err = opt.AppendBinary(b)
	case plRelease:
		n := int(releaseCount(h))
		if h.CmdFlags&(RelAll|RelOrphan|RelRename) == 0 {
			n = len(q.Resources)
			h.Data = uint32(n)
		}
		if n > MaxResources || n > len(q.Resources) {
			return nil, ErrTooMany
		}
		for i := 0; i < n; i++ {
			if b, err = q.Resources[i].AppendBinary(b); err != nil {
				return nil, err
			}
		}
	case plResDisks:
		var r *Resource
		if r, err = q.res(0); err == nil {
			b, err = r.AppendWithDisks(b)
		}
	case plRes:
		var r *Resource
		if r, err = q.res(0); err == nil {
			b, err = r.AppendBinary(b)
		}
	case plResLVB:
		var r *Resource
		if len(q.LVB) > MaxLVB {
			return nil, ErrTooMany
		}
		if r, err = q.res(0); err == nil {
			b, err = r.AppendBinary(b)
			b = append(b, q.LVB...)
		}
	case plDisk:
		d := q.Disk
		if d == nil {
			d = &Disk{}
		}
		b, err = d.AppendBinary(b)
	case plKillpath:
		k := q.Killpath
		if k == nil {
			k = &Killpath{}
		}
		b, err = k.AppendBinary(b)
	case plRIndex, plRIndexEntry, plRIndexEntryLong:
		ri := q.RIndex
		if ri == nil {
			ri = &RIndex{}
		}
		if b, err = ri.AppendBinary(b); err == nil && payloadOf(h.Cmd) != plRIndex {
			re := q.REntry
			if re == nil {
				re = &REntry{}
			}
			b, err = re.AppendBinary(b)
		}
	}
	if err != nil {
		return nil, err
	}
	switch payloadOf(h.Cmd) {
	case plLockspaceShort:
		h.Length = HeaderSize
	case plRIndexEntryLong:
		// libsanlock announces 1104+128 but sends a 64-byte rentry (docs/protocol.md "Header").
		h.Length = HeaderSize + RIndexSize + 2*REntrySize
	default:
		h.Length = uint32(len(b))
	}
	q.Header = h
	_ = h.Encode(b)
	return b, nil
}

// WriteTo writes the encoded request to w.
func (q *Request) WriteTo(w io.Writer) (int64, error) {
	b, err := q.MarshalBinary()
	if err != nil {
		return 0, err
	}
	n, err := w.Write(b)
	return int64(n), err
}

// reader tracks bytes consumed from the payload.
type reader struct {
	r io.Reader
	n int
}

func (rd *reader) read(n int) ([]byte, error) {
	b := make([]byte, n)
	m, err := io.ReadFull(rd.r, b)
	rd.n += m
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return b, nil
}

func (rd *reader) lockspace() (*Lockspace, error) {
	b, err := rd.read(LockspaceSize)
	if err != nil {
		return nil, err
	}
	ls := new(Lockspace)
	return ls, ls.UnmarshalBinary(b)
}

func (rd *reader) resource() (Resource, error) {
	var r Resource
	b, err := rd.read(ResourceSize)
	if err != nil {
		return r, err
	}
	return r, r.UnmarshalBinary(b)
}

// resourceDisks reads a resource and its disks; num_disks outside 1..4 is
// reported as a daemon result (-ERANGE) before the disks are read.
func (rd *reader) resourceDisks() (Resource, error) {
	r, err := rd.resource()
	if err != nil {
		return r, err
	}
	if r.NumDisks < 1 || r.NumDisks > MaxDisks {
		return r, &rescode.Error{Code: rescode.RvERANGE}
	}
	r.Disks = make([]Disk, r.NumDisks)
	for i := range r.Disks {
		b, err := rd.read(DiskSize)
		if err != nil {
			return r, err
		}
		_ = r.Disks[i].UnmarshalBinary(b)
	}
	return r, nil
}

// ReadRequest reads one request from r, the way a daemon must (docs/protocol.md
// "Header"): 32 header bytes, validation, then exactly the fixed payload defined
// for the command, never framed by Header.Length.
//
// Errors:
//   - io.EOF: clean end of stream before a header (connection death);
//     io.ErrUnexpectedEOF: stream ended inside a message;
//   - ErrBadMagic, ErrBadVersion: the daemon must not answer and should
//     close the connection (the *Request holds the header);
//   - ErrUnknownCmd: a header with a known magic and a command number
//     this package does not know; nothing of the payload was read (the
//     *Request holds the header): the daemon drains Length-32 bytes and
//     answers with an error (docs/protocol.md "Unknown commands");
//   - ErrPayloadTooLarge: Length > 32+maxPayload (checked before anything
//     is allocated); close the connection;
//   - *rescode.Error: the payload is invalid in a way the C daemon answers with a
//     result code (-E2BIG: too many resources or LVB too big, -ERANGE:
//     num_disks out of range). The returned *Request is non-nil: call Drain,
//     then reply with ResultReply(req.Header, code).
//
// maxPayload <= 0 selects DefaultMaxPayload.
func ReadRequest(r io.Reader, maxPayload int) (*Request, error) {
	if maxPayload <= 0 {
		maxPayload = DefaultMaxPayload
	}
	var hb [HeaderSize]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return nil, err
	}
	q := &Request{}
	_ = q.Header.Decode(hb[:])
	if err := q.Header.Validate(); err != nil {
		return q, err
	}
	h := q.Header
	if uint64(h.Length) > uint64(HeaderSize)+uint64(maxPayload) {
		return q, ErrPayloadTooLarge
	}
	rd := &reader{r: r}
	err := q.readPayload(rd)
	q.Consumed = rd.n
	return q, err
}

func (q *Request) readPayload(rd *reader) error {
	h := q.Header
	var err error
	switch payloadOf(h.Cmd) {
	case plNone:
	case plLockspace, plLockspaceShort:
		q.Lockspace, err = rd.lockspace()
	case plLockspaceHost:
		if q.Lockspace, err = rd.lockspace(); err != nil {
			return err
		}
		var b []byte
		if b, err = rd.read(HostSize); err != nil {
			return err
		}
		q.Host = new(Host)
		err = q.Host.UnmarshalBinary(b)
	case plLockspaceLeader:
		if q.Lockspace, err = rd.lockspace(); err != nil {
			return err
		}
		q.DeltaLeader, err = rd.read(DeltaLeaderSize)
	case plLockspaceEvent:
		if q.Lockspace, err = rd.lockspace(); err != nil {
			return err
		}
		var b []byte
		if b, err = rd.read(HostEventSize); err != nil {
			return err
		}
		q.HostEvent = new(HostEvent)
		err = q.HostEvent.UnmarshalBinary(b)
	case plAcquire:
		if h.Data > MaxResources {
			return &rescode.Error{Code: rescode.RvE2BIG}
		}
		for i := uint32(0); i < h.Data; i++ {
			res, err := rd.resourceDisks()
			if err != nil {
				return err
			}
			q.Resources = append(q.Resources, res)
		}
		var b []byte
		if b, err = rd.read(OptionsSize); err != nil {
			return err
		}
		q.Options = new(Options)
		err = q.Options.UnmarshalBinary(b)
	case plRelease:
		n := releaseCount(h)
		if n > MaxResources {
			return &rescode.Error{Code: rescode.RvE2BIG}
		}
		for i := uint32(0); i < n; i++ {
			res, err := rd.resource()
			if err != nil {
				return err
			}
			q.Resources = append(q.Resources, res)
		}
	case plResDisks:
		var res Resource
		res, err = rd.resourceDisks()
		q.Resources = []Resource{res}
	case plRes:
		var res Resource
		if res, err = rd.resource(); err == nil {
			q.Resources = []Resource{res}
		}
	case plResLVB:
		var res Resource
		if res, err = rd.resource(); err != nil {
			return err
		}
		q.Resources = []Resource{res}
		// The LVB size is the only length-derived payload (docs/protocol.md "Header").
		if h.Length < HeaderSize+ResourceSize {
			q.LVB = []byte{}
			return nil
		}
		n := h.Length - HeaderSize - ResourceSize
		if n > MaxLVB {
			return &rescode.Error{Code: rescode.RvE2BIG}
		}
		q.LVB, err = rd.read(int(n))
	case plDisk:
		var b []byte
		if b, err = rd.read(DiskSize); err == nil {
			q.Disk = new(Disk)
			err = q.Disk.UnmarshalBinary(b)
		}
	case plKillpath:
		var b []byte
		if b, err = rd.read(KillpathSize); err == nil {
			q.Killpath = new(Killpath)
			err = q.Killpath.UnmarshalBinary(b)
		}
	case plRIndex, plRIndexEntry, plRIndexEntryLong:
		var b []byte
		if b, err = rd.read(RIndexSize); err != nil {
			return err
		}
		q.RIndex = new(RIndex)
		_ = q.RIndex.UnmarshalBinary(b)
		if payloadOf(h.Cmd) != plRIndex {
			if b, err = rd.read(REntrySize); err != nil {
				return err
			}
			q.REntry = new(REntry)
			err = q.REntry.UnmarshalBinary(b)
		}
	}
	return err
}

// DrainLen is the number of announced payload bytes that ReadRequest did not
// consume: Length - 32 - Consumed, or 0 when the length field is smaller
// (HOST_STATUS, RENEWAL and LOOKUP_RINDEX quirks).
func (q *Request) DrainLen() int64 {
	n := int64(q.Header.Length) - HeaderSize - int64(q.Consumed)
	if n < 0 {
		return 0
	}
	return n
}

// Drain discards the unread rest of a request that failed early (docs/protocol.md
// "Header"), at most max bytes (max <= 0: DefaultMaxPayload). The C daemon only
// tries for ~20 ms; callers on a socket should set a read deadline first.
func Drain(r io.Reader, q *Request, max int64) (int64, error) {
	if max <= 0 {
		max = DefaultMaxPayload
	}
	n := min(q.DrainLen(), max)
	if n == 0 {
		return 0, nil
	}
	m, err := io.CopyN(io.Discard, r, n)
	q.Consumed += int(m)
	return m, err
}
