package wire

import (
	"bytes"
)

// Host is sanlk_host (docs/protocol.md "Host states").
type Host struct {
	HostID     uint64
	Generation uint64
	Timestamp  uint64
	IOTimeout  uint32
	Flags      uint32 // low 4 bits: HostUnknown..HostDead
}

// State returns the host state (Flags & HostMask).
func (h *Host) State() uint32 { return h.Flags & HostMask }

// StateName returns the name the CLI prints for the host state.
func (h *Host) StateName() string {
	switch h.State() {
	case HostFree:
		return "FREE"
	case HostLive:
		return "LIVE"
	case HostFail:
		return "FAIL"
	case HostDead:
		return "DEAD"
	case HostUnknown:
		return "UNKNOWN"
	}
	return "ERROR"
}

// AppendBinary appends the 32-byte encoding.
func (h *Host) AppendBinary(b []byte) ([]byte, error) {
	var buf [HostSize]byte
	le.PutUint64(buf[0:], h.HostID)
	le.PutUint64(buf[8:], h.Generation)
	le.PutUint64(buf[16:], h.Timestamp)
	le.PutUint32(buf[24:], h.IOTimeout)
	le.PutUint32(buf[28:], h.Flags)
	return append(b, buf[:]...), nil
}

// MarshalBinary returns the 32-byte encoding.
func (h *Host) MarshalBinary() ([]byte, error) { return h.AppendBinary(nil) }

// UnmarshalBinary decodes exactly 32 bytes.
func (h *Host) UnmarshalBinary(src []byte) error {
	if err := need(src, HostSize); err != nil {
		return err
	}
	h.HostID = le.Uint64(src[0:])
	h.Generation = le.Uint64(src[8:])
	h.Timestamp = le.Uint64(src[16:])
	h.IOTimeout = le.Uint32(src[24:])
	h.Flags = le.Uint32(src[28:])
	return nil
}

// HostEvent is sanlk_host_event (docs/protocol.md "Structures").
type HostEvent struct {
	HostID     uint64
	Generation uint64
	Event      uint64
	Data       uint64
}

// AppendBinary appends the 32-byte encoding.
func (e *HostEvent) AppendBinary(b []byte) ([]byte, error) {
	var buf [HostEventSize]byte
	le.PutUint64(buf[0:], e.HostID)
	le.PutUint64(buf[8:], e.Generation)
	le.PutUint64(buf[16:], e.Event)
	le.PutUint64(buf[24:], e.Data)
	return append(b, buf[:]...), nil
}

// MarshalBinary returns the 32-byte encoding.
func (e *HostEvent) MarshalBinary() ([]byte, error) { return e.AppendBinary(nil) }

// UnmarshalBinary decodes exactly 32 bytes.
func (e *HostEvent) UnmarshalBinary(src []byte) error {
	if err := need(src, HostEventSize); err != nil {
		return err
	}
	e.HostID = le.Uint64(src[0:])
	e.Generation = le.Uint64(src[8:])
	e.Event = le.Uint64(src[16:])
	e.Data = le.Uint64(src[24:])
	return nil
}

// RIndex is sanlk_rindex (docs/protocol.md "Structures").
type RIndex struct {
	Flags         uint32 // SANLK_RIF_* = align/sector flags
	MaxResources  uint32
	Unused        uint64
	LockspaceName string
	Disk          Disk
}

// AppendBinary appends the 1104-byte encoding.
func (x *RIndex) AppendBinary(b []byte) ([]byte, error) {
	var buf [RIndexSize]byte
	le.PutUint32(buf[0:], x.Flags)
	le.PutUint32(buf[4:], x.MaxResources)
	le.PutUint64(buf[8:], x.Unused)
	if err := putName(buf[16:64], x.LockspaceName); err != nil {
		return b, err
	}
	if _, err := x.Disk.AppendBinary(buf[64:64]); err != nil {
		return b, err
	}
	return append(b, buf[:]...), nil
}

// MarshalBinary returns the 1104-byte encoding.
func (x *RIndex) MarshalBinary() ([]byte, error) { return x.AppendBinary(nil) }

// UnmarshalBinary decodes exactly 1104 bytes.
func (x *RIndex) UnmarshalBinary(src []byte) error {
	if err := need(src, RIndexSize); err != nil {
		return err
	}
	x.Flags = le.Uint32(src[0:])
	x.MaxResources = le.Uint32(src[4:])
	x.Unused = le.Uint64(src[8:])
	x.LockspaceName = getName(src[16:64])
	return x.Disk.UnmarshalBinary(src[64:])
}

// REntry is sanlk_rentry (docs/protocol.md "Structures").
type REntry struct {
	Name   string
	Offset uint64
	Flags  uint32
	Unused uint32
}

// AppendBinary appends the 64-byte encoding.
func (e *REntry) AppendBinary(b []byte) ([]byte, error) {
	var buf [REntrySize]byte
	if err := putName(buf[0:48], e.Name); err != nil {
		return b, err
	}
	le.PutUint64(buf[48:], e.Offset)
	le.PutUint32(buf[56:], e.Flags)
	le.PutUint32(buf[60:], e.Unused)
	return append(b, buf[:]...), nil
}

// MarshalBinary returns the 64-byte encoding.
func (e *REntry) MarshalBinary() ([]byte, error) { return e.AppendBinary(nil) }

// UnmarshalBinary decodes exactly 64 bytes.
func (e *REntry) UnmarshalBinary(src []byte) error {
	if err := need(src, REntrySize); err != nil {
		return err
	}
	e.Name = getName(src[0:48])
	e.Offset = le.Uint64(src[48:])
	e.Flags = le.Uint32(src[56:])
	e.Unused = le.Uint32(src[60:])
	return nil
}

// State is the fixed 80-byte part of sanlk_state (docs/protocol.md "Structures"). StrLen is
// the length of the text that follows, including its NUL.
type State struct {
	Type   uint32
	Flags  uint32
	Data32 uint32
	Data64 uint64
	Name   string
	StrLen uint32
}

// AppendBinary appends the 80-byte encoding (padding zeroed).
func (s *State) AppendBinary(b []byte) ([]byte, error) {
	var buf [StateSize]byte
	le.PutUint32(buf[0:], s.Type)
	le.PutUint32(buf[4:], s.Flags)
	le.PutUint32(buf[8:], s.Data32)
	le.PutUint64(buf[16:], s.Data64)
	if err := putName(buf[24:72], s.Name); err != nil {
		return b, err
	}
	le.PutUint32(buf[72:], s.StrLen)
	return append(b, buf[:]...), nil
}

// MarshalBinary returns the 80-byte encoding.
func (s *State) MarshalBinary() ([]byte, error) { return s.AppendBinary(nil) }

// UnmarshalBinary decodes exactly 80 bytes (padding ignored).
func (s *State) UnmarshalBinary(src []byte) error {
	if err := need(src, StateSize); err != nil {
		return err
	}
	s.Type = le.Uint32(src[0:])
	s.Flags = le.Uint32(src[4:])
	s.Data32 = le.Uint32(src[8:])
	s.Data64 = le.Uint64(src[16:])
	s.Name = getName(src[24:72])
	s.StrLen = le.Uint32(src[72:])
	return nil
}

// StateRecord is one record of a STATUS, HOST_STATUS or RENEWAL stream: the
// sanlk_state, its text (without the NUL) and, for LOCKSPACE and RESOURCE
// records, the binary tail.
type StateRecord struct {
	State
	Text      string
	Lockspace *Lockspace // Type == StateLockspace
	Resource  *Resource  // Type == StateResource (with its disks)
}

// AppendBinary appends the record as the daemon sends it. State.StrLen is
// recomputed as len(Text)+1; the tail matching Type must be set.
func (r *StateRecord) AppendBinary(b []byte) ([]byte, error) {
	if len(r.Text)+1 > MaxStateText {
		return b, ErrTooMany
	}
	orig := b
	st := r.State
	st.StrLen = uint32(len(r.Text) + 1)
	b, err := st.AppendBinary(b)
	if err != nil {
		return orig, err
	}
	b = append(b, r.Text...)
	b = append(b, 0)
	switch r.Type {
	case StateLockspace:
		if r.Lockspace == nil {
			return orig, ErrBadRecord
		}
		b, err = r.Lockspace.AppendBinary(b)
	case StateResource:
		if r.Resource == nil {
			return orig, ErrBadRecord
		}
		b, err = r.Resource.AppendWithDisks(b)
	}
	if err != nil {
		return orig, err
	}
	return b, nil
}

// MarshalBinary returns the record encoding.
func (r *StateRecord) MarshalBinary() ([]byte, error) { return r.AppendBinary(nil) }

// UnmarshalBinary decodes exactly one complete record.
func (r *StateRecord) UnmarshalBinary(src []byte) error {
	rd := bytes.NewReader(src)
	rec, err := readStateRecord(rd)
	if err != nil {
		return err
	}
	if rd.Len() != 0 {
		return ErrLength
	}
	*r = *rec
	return nil
}

// EventCB is event_cb (docs/protocol.md "Structures"), sent by the daemon to event listeners.
type EventCB struct {
	Header         Header
	HostEvent      HostEvent
	FromHostID     uint64
	FromGeneration uint64
}

// NewEventCB fills the header the way the daemon does (version 1, cmd 1,
// length 80, everything else 0).
func NewEventCB(he HostEvent, fromHostID, fromGeneration uint64) EventCB {
	return EventCB{
		Header:    Header{Magic: Magic, Version: CBProto, Cmd: Cmd(CBGetEvent), Length: EventCBSize},
		HostEvent: he, FromHostID: fromHostID, FromGeneration: fromGeneration,
	}
}

// AppendBinary appends the 80-byte encoding.
func (e *EventCB) AppendBinary(b []byte) ([]byte, error) {
	var buf [EventCBSize]byte
	_ = e.Header.Encode(buf[0:32])
	_, _ = e.HostEvent.AppendBinary(buf[32:32])
	le.PutUint64(buf[64:], e.FromHostID)
	le.PutUint64(buf[72:], e.FromGeneration)
	return append(b, buf[:]...), nil
}

// MarshalBinary returns the 80-byte encoding.
func (e *EventCB) MarshalBinary() ([]byte, error) { return e.AppendBinary(nil) }

// UnmarshalBinary decodes exactly 80 bytes. Like libsanlock it does not check
// the header.
func (e *EventCB) UnmarshalBinary(src []byte) error {
	if err := need(src, EventCBSize); err != nil {
		return err
	}
	_ = e.Header.Decode(src[0:32])
	_ = e.HostEvent.UnmarshalBinary(src[32:64])
	e.FromHostID = le.Uint64(src[64:])
	e.FromGeneration = le.Uint64(src[72:])
	return nil
}

// Killpath is the 256-byte KILLPATH payload (docs/protocol.md "Structures"). libsanlock copies
// at most 126 characters of each; longer strings are rejected on encode. On
// decode byte 127 of each field is treated as NUL, as the daemon forces it.
type Killpath struct {
	Path string
	Args string
}

const killpathMaxChars = HelperPathLen - 2

// AppendBinary appends the 256-byte encoding.
func (k *Killpath) AppendBinary(b []byte) ([]byte, error) {
	if len(k.Path) > killpathMaxChars || len(k.Args) > killpathMaxChars {
		return b, ErrPathTooLong
	}
	var buf [KillpathSize]byte
	copy(buf[0:], k.Path)
	copy(buf[HelperPathLen:], k.Args)
	return append(b, buf[:]...), nil
}

// MarshalBinary returns the 256-byte encoding.
func (k *Killpath) MarshalBinary() ([]byte, error) { return k.AppendBinary(nil) }

// UnmarshalBinary decodes exactly 256 bytes.
func (k *Killpath) UnmarshalBinary(src []byte) error {
	if err := need(src, KillpathSize); err != nil {
		return err
	}
	k.Path = getName(src[0 : HelperPathLen-1])
	k.Args = getName(src[HelperPathLen : 2*HelperPathLen-1])
	return nil
}
