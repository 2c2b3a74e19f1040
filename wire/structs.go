package wire

import (
	"bytes"
)

// Structure sizes on x86_64 (docs/protocol.md "Structures").
const (
	DiskSize      = 1040
	ResourceSize  = 128
	LockspaceSize = 1104
	OptionsSize   = 56
	HostSize      = 32
	HostEventSize = 32
	RIndexSize    = 1104
	REntrySize    = 64
	StateSize     = 80
	EventCBSize   = 80
	KillpathSize  = 256
)

// putName writes s NUL-padded into dst (a fixed field). Names may use all
// bytes of the field without a terminator (docs/protocol.md notation).
func putName(dst []byte, s string) error {
	if len(s) > len(dst) {
		return ErrNameTooLong
	}
	n := copy(dst, s)
	clear(dst[n:])
	return nil
}

// getName returns the bytes of a fixed field up to the first NUL.
func getName(src []byte) string {
	if i := bytes.IndexByte(src, 0); i >= 0 {
		return string(src[:i])
	}
	return string(src)
}

// EncodeName returns s as a NUL-padded 48-byte name field; longer names are
// rejected with ErrNameTooLong.
func EncodeName(s string) ([NameLen]byte, error) {
	var b [NameLen]byte
	err := putName(b[:], s)
	return b, err
}

// DecodeName returns the name stored in a fixed field (up to the first NUL).
func DecodeName(b []byte) string { return getName(b) }

func putPath(dst []byte, s string) error {
	if len(s) >= len(dst) {
		return ErrPathTooLong
	}
	return putName(dst, s)
}

func need(src []byte, n int) error {
	if len(src) != n {
		return ErrLength
	}
	return nil
}

// Disk is sanlk_disk (docs/protocol.md "Structures").
type Disk struct {
	Path   string // raw path, at most 1023 bytes
	Offset uint64
	Pad1   uint32 // 0 from clients; STATUS records: the daemon's sector size
	Pad2   uint32 // 0 from clients; STATUS records: C daemon leaks its fd here
}

// AppendBinary appends the 1040-byte encoding.
func (d *Disk) AppendBinary(b []byte) ([]byte, error) {
	var buf [DiskSize]byte
	if err := putPath(buf[0:1024], d.Path); err != nil {
		return b, err
	}
	le.PutUint64(buf[1024:], d.Offset)
	le.PutUint32(buf[1032:], d.Pad1)
	le.PutUint32(buf[1036:], d.Pad2)
	return append(b, buf[:]...), nil
}

// MarshalBinary returns the 1040-byte encoding.
func (d *Disk) MarshalBinary() ([]byte, error) { return d.AppendBinary(nil) }

// UnmarshalBinary decodes exactly 1040 bytes.
func (d *Disk) UnmarshalBinary(src []byte) error {
	if err := need(src, DiskSize); err != nil {
		return err
	}
	d.Path = getName(src[0:1024])
	d.Offset = le.Uint64(src[1024:])
	d.Pad1 = le.Uint32(src[1032:])
	d.Pad2 = le.Uint32(src[1036:])
	return nil
}

// Resource is sanlk_resource (docs/protocol.md "Structures") plus the disks that follow it on
// the wire when a command sends them.
//
// The num_disks field is written as len(Disks) when Disks is non-empty and as
// NumDisks otherwise, so a resource decoded without its disks (RELEASE,
// CONVERT, SET_LVB...) re-encodes identically. Decoders always set NumDisks.
type Resource struct {
	LockspaceName string
	Name          string
	LVer          uint64
	Data64        uint64
	Data32        uint32
	Unused        uint32
	Flags         uint32
	NumDisks      uint32
	Disks         []Disk
}

func (r *Resource) wireNumDisks() uint32 {
	if len(r.Disks) > 0 {
		return uint32(len(r.Disks))
	}
	return r.NumDisks
}

// AppendBinary appends only the 128-byte sanlk_resource (no disks).
func (r *Resource) AppendBinary(b []byte) ([]byte, error) {
	var buf [ResourceSize]byte
	if err := putName(buf[0:48], r.LockspaceName); err != nil {
		return b, err
	}
	if err := putName(buf[48:96], r.Name); err != nil {
		return b, err
	}
	le.PutUint64(buf[96:], r.LVer)
	le.PutUint64(buf[104:], r.Data64)
	le.PutUint32(buf[112:], r.Data32)
	le.PutUint32(buf[116:], r.Unused)
	le.PutUint32(buf[120:], r.Flags)
	le.PutUint32(buf[124:], r.wireNumDisks())
	return append(b, buf[:]...), nil
}

// AppendWithDisks appends the sanlk_resource followed by its disks.
func (r *Resource) AppendWithDisks(b []byte) ([]byte, error) {
	if len(r.Disks) > MaxDisks {
		return b, ErrTooManyDisks
	}
	orig := b
	b, err := r.AppendBinary(b)
	if err != nil {
		return orig, err
	}
	for i := range r.Disks {
		if b, err = r.Disks[i].AppendBinary(b); err != nil {
			return orig, err
		}
	}
	return b, nil
}

// MarshalBinary returns the 128-byte sanlk_resource (no disks).
func (r *Resource) MarshalBinary() ([]byte, error) { return r.AppendBinary(nil) }

// UnmarshalBinary decodes exactly 128 bytes; Disks is set to nil.
func (r *Resource) UnmarshalBinary(src []byte) error {
	if err := need(src, ResourceSize); err != nil {
		return err
	}
	r.LockspaceName = getName(src[0:48])
	r.Name = getName(src[48:96])
	r.LVer = le.Uint64(src[96:])
	r.Data64 = le.Uint64(src[104:])
	r.Data32 = le.Uint32(src[112:])
	r.Unused = le.Uint32(src[116:])
	r.Flags = le.Uint32(src[120:])
	r.NumDisks = le.Uint32(src[124:])
	r.Disks = nil
	return nil
}

// DecodeResourceWithDisks decodes a sanlk_resource followed by num_disks
// sanlk_disk from the start of src and returns the bytes consumed. num_disks
// above MaxDisks gives ErrTooManyDisks; a short src gives ErrShortBuffer.
func DecodeResourceWithDisks(src []byte) (Resource, int, error) {
	var r Resource
	if len(src) < ResourceSize {
		return r, 0, ErrShortBuffer
	}
	_ = r.UnmarshalBinary(src[:ResourceSize])
	if r.NumDisks > MaxDisks {
		return r, ResourceSize, ErrTooManyDisks
	}
	n := ResourceSize
	if r.NumDisks > 0 {
		r.Disks = make([]Disk, r.NumDisks)
	}
	for i := range r.Disks {
		if len(src) < n+DiskSize {
			return r, n, ErrShortBuffer
		}
		_ = r.Disks[i].UnmarshalBinary(src[n : n+DiskSize])
		n += DiskSize
	}
	return r, n, nil
}

// Lockspace is sanlk_lockspace (docs/protocol.md "Structures").
type Lockspace struct {
	Name   string
	HostID uint64
	Flags  uint32
	Disk   Disk // host_id_disk
}

// AppendBinary appends the 1104-byte encoding (padding bytes zeroed).
func (l *Lockspace) AppendBinary(b []byte) ([]byte, error) {
	var buf [LockspaceSize]byte
	if err := putName(buf[0:48], l.Name); err != nil {
		return b, err
	}
	le.PutUint64(buf[48:], l.HostID)
	le.PutUint32(buf[56:], l.Flags)
	if _, err := l.Disk.AppendBinary(buf[64:64]); err != nil {
		return b, err
	}
	return append(b, buf[:]...), nil
}

// MarshalBinary returns the 1104-byte encoding.
func (l *Lockspace) MarshalBinary() ([]byte, error) { return l.AppendBinary(nil) }

// UnmarshalBinary decodes exactly 1104 bytes; bytes 60..63 are ignored.
func (l *Lockspace) UnmarshalBinary(src []byte) error {
	if err := need(src, LockspaceSize); err != nil {
		return err
	}
	l.Name = getName(src[0:48])
	l.HostID = le.Uint64(src[48:])
	l.Flags = le.Uint32(src[56:])
	return l.Disk.UnmarshalBinary(src[64:])
}

// Options is sanlk_options (docs/protocol.md "Structures"). No data ever follows it.
type Options struct {
	OwnerName string
	Flags     uint32
	Len       uint32
}

// AppendBinary appends the 56-byte encoding.
func (o *Options) AppendBinary(b []byte) ([]byte, error) {
	var buf [OptionsSize]byte
	if err := putName(buf[0:48], o.OwnerName); err != nil {
		return b, err
	}
	le.PutUint32(buf[48:], o.Flags)
	le.PutUint32(buf[52:], o.Len)
	return append(b, buf[:]...), nil
}

// MarshalBinary returns the 56-byte encoding.
func (o *Options) MarshalBinary() ([]byte, error) { return o.AppendBinary(nil) }

// UnmarshalBinary decodes exactly 56 bytes.
func (o *Options) UnmarshalBinary(src []byte) error {
	if err := need(src, OptionsSize); err != nil {
		return err
	}
	o.OwnerName = getName(src[0:48])
	o.Flags = le.Uint32(src[48:])
	o.Len = le.Uint32(src[52:])
	return nil
}
