package wdmd

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// RecordSize is the size of every message on the wdmd socket, in both
// directions (except the text reply to DUMP_DEBUG).
const RecordSize = 176

// NameSize is the size of the name field of a record.
const NameSize = 128

// Commands of the wdmd socket protocol (docs/wdmd.md "Client protocol").
const (
	CmdRegister      = 1 // name; no reply
	CmdRefcountSet   = 2 // no reply
	CmdRefcountClear = 3 // no reply
	CmdTestLive      = 4 // renewal_time, expire_time; no reply
	CmdStatus        = 5 // reply: the request with test_interval, fire_timeout, last_keepalive
	CmdDumpDebug     = 6 // reply: text
	CmdOpenWatchdog  = 7 // fire_timeout; reply: the request with the fire_timeout in force (0: not armed). wdmd 3.9 and later
)

// Record is one message of the wdmd socket protocol, host byte order
// (little-endian; the protocol is only used on the local machine).
type Record struct {
	Magic         uint32 // offset 0, never set or checked
	Cmd           uint32 // offset 4
	Len           uint32 // offset 8, unused
	Flags         uint32 // offset 12, unused
	TestInterval  uint32 // offset 16, STATUS reply
	FireTimeout   uint32 // offset 20, STATUS reply
	LastKeepalive uint64 // offset 24, STATUS reply, monotonic seconds
	RenewalTime   uint64 // offset 32, TEST_LIVE
	ExpireTime    uint64 // offset 40, TEST_LIVE
	Name          [NameSize]byte
}

// Marshal returns the 176-byte wire form of r.
func (r *Record) Marshal() []byte {
	b := make([]byte, RecordSize)
	le := binary.LittleEndian
	le.PutUint32(b[0:], r.Magic)
	le.PutUint32(b[4:], r.Cmd)
	le.PutUint32(b[8:], r.Len)
	le.PutUint32(b[12:], r.Flags)
	le.PutUint32(b[16:], r.TestInterval)
	le.PutUint32(b[20:], r.FireTimeout)
	le.PutUint64(b[24:], r.LastKeepalive)
	le.PutUint64(b[32:], r.RenewalTime)
	le.PutUint64(b[40:], r.ExpireTime)
	copy(b[48:], r.Name[:])
	return b
}

// Unmarshal decodes one record; b must hold exactly RecordSize bytes.
func (r *Record) Unmarshal(b []byte) error {
	if len(b) != RecordSize {
		return fmt.Errorf("wdmd record: %d bytes, want %d", len(b), RecordSize)
	}
	le := binary.LittleEndian
	r.Magic = le.Uint32(b[0:])
	r.Cmd = le.Uint32(b[4:])
	r.Len = le.Uint32(b[8:])
	r.Flags = le.Uint32(b[12:])
	r.TestInterval = le.Uint32(b[16:])
	r.FireTimeout = le.Uint32(b[20:])
	r.LastKeepalive = le.Uint64(b[24:])
	r.RenewalTime = le.Uint64(b[32:])
	r.ExpireTime = le.Uint64(b[40:])
	copy(r.Name[:], b[48:])
	return nil
}

// SetName stores name NUL-padded; it fails if name is longer than
// NameSize (libwdmd's ENAMETOOLONG). A name of exactly NameSize bytes has
// no terminator, as in libwdmd.
func (r *Record) SetName(name string) error {
	if len(name) > NameSize {
		return fmt.Errorf("wdmd name %q: longer than %d bytes", name, NameSize)
	}
	r.Name = [NameSize]byte{}
	copy(r.Name[:], name)
	return nil
}

// NameString is the name up to the first NUL.
func (r *Record) NameString() string { return cString(r.Name[:]) }

func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}
