package handover

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// The state blob (docs/upgrade.md "Format"):
//
//	offset size
//	0      8    magic "GSLHNDOV"
//	8      4    format version (little endian)
//	12     4    flags (must be 0)
//	16     8    payload length
//	24     32   SHA-256 over bytes 0..23 and the payload
//	56     n    payload: the State as one JSON object
//
// The 56-byte header layout is frozen for every format version, so any
// image can tell "not a state", "corrupt" and "version I do not know"
// apart and say which.
const (
	// FormatVersion is the version this binary writes. Version 2 (live
	// reexec with leases) adds Lockspace.AcquireLastSuccess and fills
	// Lockspace.Leader in a final (quiesced) state; a version 1 payload
	// decodes into the same State with those zero, and the daemon then
	// refuses to adopt its lockspaces (docs/upgrade.md "Versioning").
	FormatVersion uint32 = 2
	// MinFormatVersion is the oldest version this binary reads. Raise it
	// only when a version is no longer released.
	MinFormatVersion uint32 = 1

	// MaxStateSize bounds a whole blob (header + payload).
	MaxStateSize = 64 << 20

	headerSize = 56
)

var stateMagic = [8]byte{'G', 'S', 'L', 'H', 'N', 'D', 'O', 'V'}

// Errors a decode can return (wrapped with detail).
var (
	ErrNotState = errors.New("not a handover state")
	ErrTooLarge = errors.New("handover state too large")
	ErrChecksum = errors.New("handover state checksum mismatch")
	ErrVersion  = errors.New("unsupported handover format version")
	ErrInvalid  = errors.New("invalid handover state")
)

// Encode validates s and returns its blob in the current format version.
func Encode(s *State) ([]byte, error) {
	return encodeVersion(s, FormatVersion)
}

func encodeVersion(s *State, version uint32) ([]byte, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: nil state", ErrInvalid)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if version == 1 {
		var err error
		if s, err = asFormat1(s); err != nil {
			return nil, err
		}
	}
	payload, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("handover: encode state: %w", err)
	}
	if headerSize+len(payload) > MaxStateSize {
		return nil, fmt.Errorf("%w: %d bytes (limit %d)", ErrTooLarge, headerSize+len(payload), MaxStateSize)
	}
	b := make([]byte, headerSize+len(payload))
	copy(b, stateMagic[:])
	binary.LittleEndian.PutUint32(b[8:], version)
	binary.LittleEndian.PutUint32(b[12:], 0)
	binary.LittleEndian.PutUint64(b[16:], uint64(len(payload)))
	copy(b[headerSize:], payload)
	sum := blobSum(b[:24], payload)
	copy(b[24:56], sum[:])
	return b, nil
}

func blobSum(head, payload []byte) [32]byte {
	h := sha256.New()
	h.Write(head)
	h.Write(payload)
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// Decode checks and decodes a blob written by this or an older supported
// version, and validates the result. It never panics; every failure is
// one of the Err* values above wrapped with detail, and nothing is
// returned with an error.
func Decode(b []byte) (*State, error) {
	if len(b) > MaxStateSize {
		return nil, fmt.Errorf("%w: %d bytes (limit %d)", ErrTooLarge, len(b), MaxStateSize)
	}
	if len(b) < headerSize {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrNotState, len(b), headerSize)
	}
	if !bytes.Equal(b[:8], stateMagic[:]) {
		return nil, fmt.Errorf("%w: bad magic %q", ErrNotState, b[:8])
	}
	n := binary.LittleEndian.Uint64(b[16:])
	if n != uint64(len(b)-headerSize) {
		return nil, fmt.Errorf("%w: header says %d payload bytes, have %d", ErrNotState, n, len(b)-headerSize)
	}
	payload := b[headerSize:]
	sum := blobSum(b[:24], payload)
	if !bytes.Equal(sum[:], b[24:56]) {
		return nil, fmt.Errorf("%w: sha256 %x, header says %x", ErrChecksum, sum[:8], b[24:32])
	}
	v := binary.LittleEndian.Uint32(b[8:])
	if v < MinFormatVersion || v > FormatVersion {
		return nil, fmt.Errorf("%w %d: this binary reads %d..%d", ErrVersion, v, MinFormatVersion, FormatVersion)
	}
	if f := binary.LittleEndian.Uint32(b[12:]); f != 0 {
		return nil, fmt.Errorf("%w: unknown header flags %#x", ErrNotState, f)
	}
	s, err := decodePayload(v, payload)
	if err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// decodePayload decodes a payload of format version v into the current
// State. A new format version adds its case here and upgrades the older
// payloads (docs/upgrade.md "Versioning").
func decodePayload(v uint32, payload []byte) (*State, error) {
	switch v {
	case 1, 2:
		// Version 1's fields are a subset of version 2's, with the same
		// names and meanings.
		s := new(State)
		if err := strictJSON(payload, s); err != nil {
			return nil, fmt.Errorf("%w: payload (format %d): %v", ErrInvalid, v, err)
		}
		return s, nil
	}
	return nil, fmt.Errorf("%w %d", ErrVersion, v)
}

// strictJSON decodes exactly one JSON object into v: unknown fields,
// a non-object top level and trailing data are errors.
func strictJSON(p []byte, v any) error {
	p = bytes.TrimLeft(p, " \t\r\n")
	if len(p) == 0 || p[0] != '{' {
		return errors.New("not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the state object")
	}
	return nil
}

// asFormat1 returns a copy of s without what format 1 did not have (the
// fields of format 2 and those added to it since, docs/upgrade.md
// "Versioning"), as the previous release wrote it: a lockspace's record
// bytes, acquire time, SET_CONFIG flags and host table, a token's hold.
// A state with event listeners or pending requests has no format-1 form.
func asFormat1(s *State) (*State, error) {
	c := *s
	c.Lockspaces = append([]Lockspace(nil), s.Lockspaces...)
	for i := range c.Lockspaces {
		ls := &c.Lockspaces[i]
		if len(ls.EventListeners) > 0 {
			return nil, fmt.Errorf("%w: lockspace %s: event listeners have no format 1", ErrInvalid, ls.Name)
		}
		ls.Leader.Raw, ls.AcquireLastSuccess, ls.HostTable = nil, 0, nil
		ls.ExternalUsed, ls.UsedByOrphans, ls.UsedRetries = false, false, 0
	}
	for i := range s.Clients {
		if len(s.Clients[i].Pending) > 0 {
			return nil, fmt.Errorf("%w: client %d: pending requests have no format 1", ErrInvalid, i)
		}
	}
	c.Tokens = append([]Token(nil), s.Tokens...)
	for i := range c.Tokens {
		c.Tokens[i].Hold = nil
	}
	c.Orphans = append([]Orphan(nil), s.Orphans...)
	for i := range c.Orphans {
		c.Orphans[i].Hold = nil
	}
	return &c, nil
}
