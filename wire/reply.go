package wire

import (
	"bytes"
	"errors"
	"io"

	"github.com/gosanlock/gosanlock/rescode"
)

// Bounds applied when reading replies, so a hostile or broken peer cannot
// make the client allocate without limit.
const (
	MaxLogDump      = 8 << 20 // the daemon's buffer is 1 MiB
	MaxInquireText  = 1 << 16 // 8 resource strings of at most 4400 bytes
	MaxStateRecords = 1 << 16 // records in one STATUS / HOST_STATUS / RENEWAL stream
	maxListBytes    = 1 << 20 // GET_LOCKSPACES / GET_HOSTS buffer of the C daemon
)

// Reply is one daemon-to-client message. Which fields are used depends on the
// command (docs/protocol.md "Commands"):
//
//	Lockspace   READ_LOCKSPACE
//	Resource    READ_RESOURCE, READ_RESOURCE_OWNERS
//	Lockspaces  GET_LOCKSPACES
//	Hosts       GET_HOSTS, READ_RESOURCE_OWNERS
//	REntry      UPDATE/LOOKUP_RINDEX, CREATE/DELETE_RESOURCE
//	Data        INQUIRE state string (no NUL), LOG_DUMP text, GET_LVB bytes
//	Records     STATUS, HOST_STATUS, RENEWAL
//	Lockspace, Host            READ_LOCKSPACE_HOST
//	Host, OwnerName            ACQUIRE2 answered -243 or -249
type Reply struct {
	Header     Header
	Lockspace  *Lockspace
	Resource   *Resource
	Lockspaces []Lockspace
	Hosts      []Host
	REntry     *REntry
	Data       []byte
	Records    []StateRecord
	// Host is the host record of READ_LOCKSPACE_HOST and the owner of
	// ACQUIRE2's held answer.
	Host *Host
	// OwnerName is the owner's host name of ACQUIRE2's held answer.
	OwnerName string
}

// Result returns header.data as a signed result.
func (p *Reply) Result() int32 { return p.Header.Result() }

// Err returns *rescode.Error for a negative result, else nil.
func (p *Reply) Err() error { return rescode.ResultErr(p.Result()) }

type replyKind int

const (
	rpNone          replyKind = iota // REGISTER, SHUTDOWN: nothing is sent
	rpResult                         // header only
	rpStream                         // header + sanlk_state records until EOF
	rpLogDump                        // header (data = n) + n bytes
	rpInquire                        // header + length-32 bytes (state string + NUL)
	rpLockspace                      // header + sanlk_lockspace
	rpResource                       // header + sanlk_resource
	rpLockspaces                     // header + count x sanlk_lockspace
	rpHosts                          // header + count x sanlk_host
	rpOwners                         // header + sanlk_resource + count x sanlk_host
	rpLVB                            // header + length-32 bytes on success
	rpREntry                         // header + sanlk_rentry
	rpAcquire2                       // header; on -243/-249 + sanlk_host + name[48]
	rpLockspaceHost                  // header + sanlk_lockspace + sanlk_host, whatever the result
)

// Acquire2OwnerSize is the payload of ACQUIRE2's held answer: the owner's
// host record and its name.
const Acquire2OwnerSize = HostSize + NameLen

// Acquire2HasOwner reports whether ACQUIRE2's result rv carries the owner
// (docs/protocol.md "Commands of 3.9.5 and 5.1.1").
func Acquire2HasOwner(rv int32) bool {
	return rv == int32(rescode.ErrAcquireIDLive) || rv == int32(rescode.ErrAcquireOwnedNoTimeout)
}

var replyKinds = [...]replyKind{
	CmdRegister:           rpNone,
	CmdAddLockspace:       rpResult,
	CmdRemLockspace:       rpResult,
	CmdShutdown:           rpNone,
	CmdStatus:             rpStream,
	CmdLogDump:            rpLogDump,
	CmdAcquire:            rpResult,
	CmdRelease:            rpResult,
	CmdInquire:            rpInquire,
	CmdRestrict:           rpResult,
	CmdRequest:            rpResult,
	CmdAlign:              rpResult,
	CmdExamineLockspace:   rpResult,
	CmdExamineResource:    rpResult,
	CmdHostStatus:         rpStream,
	CmdInqLockspace:       rpResult,
	CmdKillpath:           rpResult,
	CmdWriteLockspace:     rpResult,
	CmdWriteResource:      rpResult,
	CmdReadLockspace:      rpLockspace,
	CmdReadResource:       rpResource,
	CmdGetLockspaces:      rpLockspaces,
	CmdGetHosts:           rpHosts,
	CmdReadResourceOwners: rpOwners,
	CmdSetLVB:             rpResult,
	CmdGetLVB:             rpLVB,
	CmdConvert:            rpResult,
	CmdVersion:            rpResult,
	CmdShutdownWait:       rpResult,
	CmdRegEvent:           rpResult,
	CmdEndEvent:           rpResult,
	CmdSetEvent:           rpResult,
	CmdSetConfig:          rpResult,
	CmdRenewal:            rpStream,
	CmdFormatRIndex:       rpResult,
	CmdUpdateRIndex:       rpREntry,
	CmdLookupRIndex:       rpREntry,
	CmdCreateResource:     rpREntry,
	CmdDeleteResource:     rpREntry,
	CmdRebuildRIndex:      rpResult,
	// The 5.x commands (docs/protocol.md "Commands of 3.9.5 and 5.1.1").
	CmdAcquire2:          rpAcquire2,
	CmdReadLockspaceHost: rpLockspaceHost,
	CmdInitLockspaceHost: rpResult,
	CmdSetHost:           rpResult,
}

var privateReplyKinds = [...]replyKind{
	CmdReexec - PrivateCmdBase:    rpStream, // the reason of a failure
	CmdHello - PrivateCmdBase:     rpResult,
	CmdLastError - PrivateCmdBase: rpStream, // the failure, one record
}

// replyOf is the reply shape of a valid command c.
func replyOf(c Cmd) replyKind {
	if c.Sanlock() {
		return replyKinds[c]
	}
	return privateReplyKinds[c-PrivateCmdBase]
}

// HasReply reports whether the daemon answers cmd at all (REGISTER and
// SHUTDOWN get no reply).
func HasReply(cmd Cmd) bool { return cmd.Valid() && replyOf(cmd) != rpNone }

// readExact reads n bytes without trusting n for the allocation: the buffer
// grows with the data actually received.
func readExact(r io.Reader, n int64) ([]byte, error) {
	if n <= 4096 {
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, unexpected(err)
		}
		return b, nil
	}
	var buf bytes.Buffer
	m, err := io.CopyN(&buf, r, n)
	if m != n {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return buf.Bytes(), err
	}
	return buf.Bytes(), nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readStateRecord reads one sanlk_state record with its text and tail.
// io.EOF is returned only when the stream ends exactly before a record.
func readStateRecord(r io.Reader) (*StateRecord, error) {
	var sb [StateSize]byte
	if n, err := io.ReadFull(r, sb[:]); err != nil {
		if n == 0 && errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, unexpected(err)
	}
	rec := &StateRecord{}
	_ = rec.State.UnmarshalBinary(sb[:])
	if rec.StrLen > MaxStateText {
		return nil, ErrBadRecord
	}
	if rec.StrLen > 0 {
		text, err := readExact(r, int64(rec.StrLen))
		if err != nil {
			return nil, err
		}
		rec.Text = getName(text)
	}
	switch rec.Type {
	case StateLockspace:
		b, err := readExact(r, LockspaceSize)
		if err != nil {
			return nil, err
		}
		rec.Lockspace = new(Lockspace)
		_ = rec.Lockspace.UnmarshalBinary(b)
	case StateResource:
		b, err := readExact(r, ResourceSize)
		if err != nil {
			return nil, err
		}
		res := new(Resource)
		_ = res.UnmarshalBinary(b)
		if res.NumDisks > MaxDisks {
			return nil, ErrTooManyDisks
		}
		if res.NumDisks > 0 {
			res.Disks = make([]Disk, res.NumDisks)
		}
		for i := range res.Disks {
			db, err := readExact(r, DiskSize)
			if err != nil {
				return nil, err
			}
			_ = res.Disks[i].UnmarshalBinary(db)
		}
		rec.Resource = res
	}
	return rec, nil
}

// ReadStateRecords reads records until EOF (the daemon closes the connection
// after the last one, docs/protocol.md "Commands").
func ReadStateRecords(r io.Reader) ([]StateRecord, error) {
	var recs []StateRecord
	for {
		rec, err := readStateRecord(r)
		if errors.Is(err, io.EOF) {
			return recs, nil
		}
		if err != nil {
			return recs, err
		}
		if len(recs) >= MaxStateRecords {
			return recs, ErrTooMany
		}
		recs = append(recs, *rec)
	}
}

// ReadReply reads the reply to a request of command cmd, the way libsanlock
// does (docs/protocol.md "Header"): the header, then the payload of that command. cmd is
// the command that was sent (the final SHUTDOWN_WAIT reply carries cmd 0).
// A negative result is not an error here: check Reply.Result or Reply.Err.
// Streamed replies are read until EOF.
func ReadReply(r io.Reader, cmd Cmd) (*Reply, error) {
	if !cmd.Valid() {
		return nil, ErrUnknownCmd
	}
	var hb [HeaderSize]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return nil, err
	}
	p := &Reply{}
	_ = p.Header.Decode(hb[:])
	if p.Header.Magic != cmd.HeaderMagic() {
		return p, ErrBadMagic
	}
	h := p.Header
	ok := h.Result() >= 0
	payload := int64(h.Length) - HeaderSize
	var err error
	switch replyOf(cmd) {
	case rpNone, rpResult:
	case rpStream:
		p.Records, err = ReadStateRecords(r)
	case rpLogDump:
		if !ok {
			break
		}
		if h.Data > MaxLogDump {
			return p, ErrTooMany
		}
		p.Data, err = readExact(r, int64(h.Data))
	case rpInquire:
		if payload <= 0 {
			break
		}
		if payload > MaxInquireText {
			return p, ErrTooMany
		}
		var b []byte
		if b, err = readExact(r, payload); err == nil {
			p.Data = []byte(getName(b))
		}
	case rpLockspace:
		if !ok {
			break
		}
		var b []byte
		if b, err = readExact(r, LockspaceSize); err == nil {
			p.Lockspace = new(Lockspace)
			_ = p.Lockspace.UnmarshalBinary(b)
		}
	case rpResource:
		// libsanlock reads the resource even for negative results.
		var b []byte
		if b, err = readExact(r, ResourceSize); err == nil {
			p.Resource = new(Resource)
			_ = p.Resource.UnmarshalBinary(b)
		}
	case rpLockspaces:
		p.Lockspaces, err = readList[Lockspace](r, h, LockspaceSize)
	case rpHosts:
		p.Hosts, err = readList[Host](r, h, HostSize)
	case rpOwners:
		if !ok {
			break
		}
		var b []byte
		if b, err = readExact(r, ResourceSize); err != nil {
			break
		}
		p.Resource = new(Resource)
		_ = p.Resource.UnmarshalBinary(b)
		if h.Data2 > MaxHosts {
			return p, ErrTooMany
		}
		p.Hosts, err = readItems[Host](r, int(h.Data2), HostSize)
	case rpLVB:
		if !ok || payload <= 0 {
			break
		}
		if payload > MaxLVB {
			return p, ErrTooMany
		}
		p.Data, err = readExact(r, payload)
	case rpREntry:
		if !ok {
			break
		}
		var b []byte
		if b, err = readExact(r, REntrySize); err == nil {
			p.REntry = new(REntry)
			_ = p.REntry.UnmarshalBinary(b)
		}
	case rpAcquire2:
		if !Acquire2HasOwner(h.Result()) || payload < Acquire2OwnerSize {
			break
		}
		var b []byte
		if b, err = readExact(r, Acquire2OwnerSize); err == nil {
			p.Host = new(Host)
			_ = p.Host.UnmarshalBinary(b[:HostSize])
			p.OwnerName = getName(b[HostSize:])
		}
	case rpLockspaceHost:
		var b []byte
		if b, err = readExact(r, LockspaceSize+HostSize); err == nil {
			p.Lockspace, p.Host = new(Lockspace), new(Host)
			_ = p.Lockspace.UnmarshalBinary(b[:LockspaceSize])
			_ = p.Host.UnmarshalBinary(b[LockspaceSize:])
		}
	}
	return p, err
}

// DecodeReply decodes a complete reply held in b.
func DecodeReply(cmd Cmd, b []byte) (*Reply, error) {
	return ReadReply(bytes.NewReader(b), cmd)
}

type unmarshaler[T any] interface {
	*T
	UnmarshalBinary([]byte) error
}

// readList reads a counted list (GET_LOCKSPACES, GET_HOSTS). The count is
// data2; length must agree (32 + count*size). On a negative result nothing
// is read when the length says so.
func readList[T any, PT unmarshaler[T]](r io.Reader, h Header, size int) ([]T, error) {
	if h.Length <= HeaderSize {
		if h.Result() >= 0 && h.Data2 != 0 {
			return nil, ErrBadRecord
		}
		return nil, nil
	}
	payload := int64(h.Length) - HeaderSize
	if payload%int64(size) != 0 || payload/int64(size) != int64(h.Data2) {
		return nil, ErrBadRecord
	}
	if payload > maxListBytes {
		return nil, ErrTooMany
	}
	return readItems[T, PT](r, int(h.Data2), size)
}

func readItems[T any, PT unmarshaler[T]](r io.Reader, n, size int) ([]T, error) {
	if n == 0 {
		return nil, nil
	}
	out := make([]T, 0, min(n, 64))
	buf := make([]byte, size)
	for i := 0; i < n; i++ {
		if _, err := io.ReadFull(r, buf); err != nil {
			return out, unexpected(err)
		}
		var v T
		_ = PT(&v).UnmarshalBinary(buf)
		out = append(out, v)
	}
	return out, nil
}

// MarshalBinary encodes a reply as the daemon sends it for command cmd
// (normally p.Header.Cmd; pass it explicitly because the final SHUTDOWN_WAIT
// reply has cmd 0). It fills the header fields that depend on the payload:
//
//   - counted payloads (READ_LOCKSPACE, READ_RESOURCE, GET_LOCKSPACES,
//     GET_HOSTS, READ_RESOURCE_OWNERS, rindex, INQUIRE, GET_LVB with Data):
//     Length = 32 + payload bytes; data2 = count for the lists;
//   - LOG_DUMP: data = len(Data), Length left as given (the daemon echoes 32);
//   - STATUS, HOST_STATUS, RENEWAL: Length left as given, records follow;
//   - INQUIRE: Data nil = no payload; Data non-nil = Data + NUL (so an empty
//     non-nil Data gives the 33-byte reply of the formatting errors);
//   - GET_LVB: Data nil = no payload and Length left as given (error case).
//
// READ_LOCKSPACE, READ_RESOURCE, READ_LOCKSPACE_HOST and rindex replies
// always carry their payload (zero when nil), like the C daemon; ACQUIRE2
// carries the owner when Host is set (Length 112 + 32), else nothing.
func (p *Reply) MarshalBinary(cmd Cmd) ([]byte, error) {
	if !cmd.Valid() {
		return nil, ErrUnknownCmd
	}
	h := p.Header
	b := make([]byte, HeaderSize, HeaderSize+LockspaceSize)
	var err error
	counted := true
	switch replyOf(cmd) {
	case rpNone:
		return nil, nil
	case rpResult:
		counted = false
	case rpStream:
		counted = false
		for i := range p.Records {
			if b, err = p.Records[i].AppendBinary(b); err != nil {
				return nil, err
			}
		}
	case rpLogDump:
		counted = false
		h.Data = uint32(len(p.Data))
		b = append(b, p.Data...)
	case rpInquire:
		if p.Data != nil {
			b = append(b, p.Data...)
			b = append(b, 0)
		}
	case rpLockspace:
		ls := p.Lockspace
		if ls == nil {
			ls = &Lockspace{}
		}
		b, err = ls.AppendBinary(b)
	case rpResource:
		res := p.Resource
		if res == nil {
			res = &Resource{}
		}
		b, err = res.AppendBinary(b)
	case rpLockspaces:
		h.Data2 = uint32(len(p.Lockspaces))
		for i := range p.Lockspaces {
			if b, err = p.Lockspaces[i].AppendBinary(b); err != nil {
				return nil, err
			}
		}
	case rpHosts, rpOwners:
		if replyOf(cmd) == rpOwners {
			res := p.Resource
			if res == nil {
				res = &Resource{}
			}
			if b, err = res.AppendBinary(b); err != nil {
				return nil, err
			}
		}
		h.Data2 = uint32(len(p.Hosts))
		for i := range p.Hosts {
			b, _ = p.Hosts[i].AppendBinary(b)
		}
	case rpLVB:
		if p.Data == nil {
			counted = false
		}
		b = append(b, p.Data...)
	case rpREntry:
		re := p.REntry
		if re == nil {
			re = &REntry{}
		}
		b, err = re.AppendBinary(b)
	case rpAcquire2:
		if p.Host == nil {
			counted = false
			break
		}
		b, _ = p.Host.AppendBinary(b)
		var name [NameLen]byte
		if len(p.OwnerName) > NameLen {
			return nil, ErrNameTooLong
		}
		copy(name[:], p.OwnerName)
		b = append(b, name[:]...)
	case rpLockspaceHost:
		ls, host := p.Lockspace, p.Host
		if ls == nil {
			ls = &Lockspace{}
		}
		if host == nil {
			host = &Host{}
		}
		if b, err = ls.AppendBinary(b); err == nil {
			b, _ = host.AppendBinary(b)
		}
	}
	if err != nil {
		return nil, err
	}
	if counted {
		h.Length = uint32(len(b))
	}
	p.Header = h
	_ = h.Encode(b)
	return b, nil
}
