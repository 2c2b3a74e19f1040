package wire

import (
	"bytes"
	"encoding"
	"errors"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/gosanlock/gosanlock/rescode"
)

type binaryCodec interface {
	encoding.BinaryMarshaler
	encoding.BinaryUnmarshaler
}

// structCases returns a filled value of every fixed structure, a fresh zero
// value to decode into, and the expected size.
func structCases() []struct {
	name      string
	v, fresh  binaryCodec
	size      int
	offsetsOK func([]byte) bool
} {
	return []struct {
		name      string
		v, fresh  binaryCodec
		size      int
		offsetsOK func([]byte) bool
	}{
		{"disk", &Disk{Path: "/p", Offset: 0x1122, Pad1: 512, Pad2: 0xffffffff}, &Disk{}, DiskSize,
			func(b []byte) bool { return b[1024] == 0x22 && b[1032] == 0x00 && b[1033] == 0x02 && b[1036] == 0xff }},
		{"resource", &Resource{LockspaceName: "LS", Name: "R", LVer: 5, Data64: 6, Data32: 7, Unused: 8, Flags: ResShared, NumDisks: 2},
			&Resource{}, ResourceSize,
			func(b []byte) bool {
				return b[48] == 'R' && b[96] == 5 && b[104] == 6 && b[112] == 7 && b[120] == 4 && b[124] == 2
			}},
		{"lockspace", &Lockspace{Name: strings.Repeat("n", 48), HostID: 2000, Flags: LSFRem, Disk: Disk{Path: "/x", Offset: 9}},
			&Lockspace{}, LockspaceSize,
			func(b []byte) bool {
				return b[47] == 'n' && b[48] == 0xd0 && b[49] == 0x07 && b[56] == 2 && b[64] == '/' && b[64+1024] == 9
			}},
		{"options", &Options{OwnerName: "me", Flags: 1, Len: 2}, &Options{}, OptionsSize,
			func(b []byte) bool { return b[48] == 1 && b[52] == 2 }},
		{"host", &Host{HostID: 1, Generation: 2, Timestamp: 3, IOTimeout: 4, Flags: HostLive}, &Host{}, HostSize,
			func(b []byte) bool { return b[8] == 2 && b[16] == 3 && b[24] == 4 && b[28] == 3 }},
		{"host_event", &HostEvent{HostID: 1, Generation: 2, Event: 3, Data: 4}, &HostEvent{}, HostEventSize,
			func(b []byte) bool { return b[8] == 2 && b[16] == 3 && b[24] == 4 }},
		{"rindex", &RIndex{Flags: ResAlign1M, MaxResources: 3, Unused: 4, LockspaceName: "LS", Disk: Disk{Path: "/r", Offset: 5}},
			&RIndex{}, RIndexSize,
			func(b []byte) bool { return b[0] == 0x10 && b[4] == 3 && b[8] == 4 && b[16] == 'L' && b[64] == '/' }},
		{"rentry", &REntry{Name: "e", Offset: 6, Flags: 7, Unused: 8}, &REntry{}, REntrySize,
			func(b []byte) bool { return b[48] == 6 && b[56] == 7 && b[60] == 8 }},
		{"state", &State{Type: StateHost, Data32: 1, Data64: 2, Name: "x", StrLen: 10}, &State{}, StateSize,
			func(b []byte) bool { return b[0] == 5 && b[8] == 1 && b[16] == 2 && b[24] == 'x' && b[72] == 10 }},
		{"event_cb", func() *EventCB { e := NewEventCB(HostEvent{HostID: 1, Event: 2}, 3, 4); return &e }(), &EventCB{}, EventCBSize,
			func(b []byte) bool { return b[16] == 80 && b[32] == 1 && b[48] == 2 && b[64] == 3 && b[72] == 4 }},
		{"killpath", &Killpath{Path: "/bin/k", Args: "x y"}, &Killpath{}, KillpathSize,
			func(b []byte) bool { return b[0] == '/' && b[128] == 'x' }},
		{"header", &Header{Magic: Magic, Version: 1, Cmd: CmdAcquire, CmdFlags: 2, Length: 3, Seq: 4, Data: 5, Data2: 6}, &Header{}, HeaderSize,
			func(b []byte) bool {
				return b[8] == 7 && b[12] == 2 && b[16] == 3 && b[20] == 4 && b[24] == 5 && b[28] == 6
			}},
	}
}

func TestStructRoundTrip(t *testing.T) {
	for _, tc := range structCases() {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.v.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if len(b) != tc.size {
				t.Fatalf("size %d want %d", len(b), tc.size)
			}
			if !tc.offsetsOK(b) {
				t.Errorf("field offsets wrong: %x", b)
			}
			if err := tc.fresh.UnmarshalBinary(b); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(tc.fresh, tc.v) {
				t.Errorf("got %+v want %+v", tc.fresh, tc.v)
			}
			// Wrong lengths are rejected, never panic.
			for _, n := range []int{0, 1, tc.size - 1, tc.size + 1} {
				if err := tc.fresh.UnmarshalBinary(make([]byte, n)); err == nil {
					t.Errorf("accepted %d bytes", n)
				}
			}
		})
	}
}

func TestResourceWithDisks(t *testing.T) {
	r := sampleRes("R", 3)
	b, err := r.AppendWithDisks(nil)
	if err != nil || len(b) != ResourceSize+3*DiskSize {
		t.Fatal(len(b), err)
	}
	got, n, err := DecodeResourceWithDisks(append(b, 1, 2, 3))
	if err != nil || n != len(b) || !reflect.DeepEqual(got, r) {
		t.Fatalf("%+v %d %v", got, n, err)
	}
	if _, _, err := DecodeResourceWithDisks(b[:len(b)-1]); !errors.Is(err, ErrShortBuffer) {
		t.Errorf("short: %v", err)
	}
	le.PutUint32(b[124:], 5)
	if _, _, err := DecodeResourceWithDisks(b); !errors.Is(err, ErrTooManyDisks) {
		t.Errorf("5 disks: %v", err)
	}
	r.Disks = append(r.Disks, sampleDisk(3), sampleDisk(4))
	if _, err := r.AppendWithDisks(nil); !errors.Is(err, ErrTooManyDisks) {
		t.Errorf("encode 5 disks: %v", err)
	}
}

func TestNames(t *testing.T) {
	full := strings.Repeat("x", NameLen)
	b, err := EncodeName(full)
	if err != nil || DecodeName(b[:]) != full {
		t.Fatalf("48-byte name: %v", err)
	}
	if _, err := EncodeName(full + "y"); !errors.Is(err, ErrNameTooLong) {
		t.Errorf("49-byte name: %v", err)
	}
	b, _ = EncodeName("ab")
	if !bytes.Equal(b[:3], []byte("ab\x00")) || DecodeName(b[:]) != "ab" {
		t.Errorf("padding %x", b)
	}
	// Garbage after the NUL is ignored.
	b[5] = 'z'
	if DecodeName(b[:]) != "ab" {
		t.Errorf("garbage after NUL")
	}
	for _, v := range []encoding.BinaryMarshaler{
		&Lockspace{Name: full + "y"}, &Resource{Name: full + "y"}, &Resource{LockspaceName: full + "y"},
		&Options{OwnerName: full + "y"}, &RIndex{LockspaceName: full + "y"}, &REntry{Name: full + "y"},
		&State{Name: full + "y"},
	} {
		if _, err := v.MarshalBinary(); !errors.Is(err, ErrNameTooLong) {
			t.Errorf("%T accepted a long name: %v", v, err)
		}
	}
	long := strings.Repeat("p", PathLen)
	if _, err := (&Disk{Path: long[:PathLen-1]}).MarshalBinary(); err != nil {
		t.Errorf("1023-byte path: %v", err)
	}
	if _, err := (&Disk{Path: long}).MarshalBinary(); !errors.Is(err, ErrPathTooLong) {
		t.Errorf("1024-byte path: %v", err)
	}
	if _, err := (&Killpath{Path: strings.Repeat("k", 127)}).MarshalBinary(); err == nil {
		t.Errorf("127-char killpath accepted")
	}
	// The daemon forces byte 127 of each killpath field to NUL.
	kb := bytes.Repeat([]byte{'k'}, KillpathSize)
	var k Killpath
	_ = k.UnmarshalBinary(kb)
	if len(k.Path) != 127 || len(k.Args) != 127 {
		t.Errorf("killpath %d %d", len(k.Path), len(k.Args))
	}
}

func TestStateRecordRoundTrip(t *testing.T) {
	recs := []StateRecord{
		{State: State{Type: StateDaemon, Name: "host"}, Text: "our_host_name=host"},
		{State: State{Type: StateLockspace, Data64: 1, Name: "LS"}, Text: "list=spaces", Lockspace: sampleLS},
		{State: State{Type: StateResource, Data32: 99, Data64: 2, Name: "R"}, Text: "list=held", Resource: func() *Resource { r := sampleRes("R", 2); return &r }()},
		{State: State{Type: StateRenewal, Data64: 3}, Text: ""},
	}
	for _, r := range recs {
		b, err := r.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var got StateRecord
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		r.StrLen = uint32(len(r.Text) + 1)
		if !reflect.DeepEqual(got, r) {
			t.Errorf("got %+v want %+v", got, r)
		}
		if err := got.UnmarshalBinary(append(b, 0)); !errors.Is(err, ErrLength) {
			t.Errorf("trailing byte: %v", err)
		}
	}
	if _, err := (&StateRecord{State: State{Type: StateLockspace}}).MarshalBinary(); !errors.Is(err, ErrBadRecord) {
		t.Errorf("missing tail: %v", err)
	}
	if _, err := (&StateRecord{Text: strings.Repeat("t", MaxStateText)}).MarshalBinary(); err == nil {
		t.Errorf("oversized text accepted")
	}
	// str_len over 4096 is rejected before reading.
	var s State
	s.StrLen = MaxStateText + 1
	b, _ := s.MarshalBinary()
	if _, err := ReadStateRecords(bytes.NewReader(b)); !errors.Is(err, ErrBadRecord) {
		t.Errorf("str_len 4097: %v", err)
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		code       int
		name, text string
	}{
		{int(rescode.ErrLeaderMagic), "SANLK_LEADER_MAGIC", "Lease does not exist on storage"},
		{int(rescode.ErrAcquireIDLive), "SANLK_ACQUIRE_IDLIVE", "Lease is held by another host"},
		{int(rescode.ErrAcquireLver), "SANLK_ACQUIRE_LVER", "Unknown error"},
		{int(rescode.ErrRindexDiff), "SANLK_RINDEX_DIFF", "Unknown error"},
		{rescode.RvENOENT, "ENOENT", "no such file or directory"},
		{rescode.RvEBUSY, "EBUSY", "device or resource busy"},
		{-299, "", "Unknown error"},
	} {
		if rescode.CodeName(tc.code) != tc.name || rescode.Strerror(tc.code) != tc.text {
			t.Errorf("%d: %q %q", tc.code, rescode.CodeName(tc.code), rescode.Strerror(tc.code))
		}
	}
	err := error(&rescode.Error{Code: rescode.RvENOENT})
	if !errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EBUSY) || !errors.Is(err, &rescode.Error{Code: -2}) {
		t.Errorf("errors.Is mismatch")
	}
	if (&rescode.Error{Code: int(rescode.ErrHostIDBusy)}).Error() != "sanlock: Lease host ID is being used by another host (-262)" {
		t.Errorf("%v", &rescode.Error{Code: int(rescode.ErrHostIDBusy)})
	}
	if rescode.ErrorCode(nil) != 0 || rescode.ErrorCode(syscall.ECONNREFUSED) != -111 || rescode.ErrorCode(errors.New("x")) != -1 {
		t.Errorf("ErrorCode")
	}
	for c := CmdRegister; c <= MaxCmd; c++ {
		if got, ok := CmdByDebugName(c.DebugName()); !ok || got != c {
			t.Errorf("%v", c)
		}
	}
	if CmdAddLockspace.String() != "SM_CMD_ADD_LOCKSPACE" || Cmd(45).String() != "SM_CMD_45" || CmdReexec.String() != "GOSL_CMD_REEXEC" || Cmd(0).DebugName() != "cmd0" {
		t.Errorf("names")
	}
}
