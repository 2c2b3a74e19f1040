package wire

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"reflect"
	"testing"

	"github.com/gosanlock/gosanlock/rescode"
)

func sampleDisk(i int) Disk {
	return Disk{Path: "/dev/vg/leases" + string(rune('a'+i)), Offset: uint64(i+1) * mib}
}

func sampleRes(name string, disks int) Resource {
	r := Resource{LockspaceName: "LS", Name: name, LVer: 7, Flags: ResLVer}
	for i := 0; i < disks; i++ {
		r.Disks = append(r.Disks, sampleDisk(i))
	}
	r.NumDisks = uint32(disks)
	return r
}

func noDisks(r Resource) Resource {
	r.Disks = nil
	return r
}

var (
	sampleLS = &Lockspace{Name: "LS", HostID: 3, Flags: ResAlign1M | ResSector512, Disk: Disk{Path: "/var/tmp/ls", Offset: 0}}
	sampleRI = &RIndex{Flags: ResAlign8M | ResSector4K, MaxResources: 100, LockspaceName: "LS", Disk: Disk{Path: "/dev/x", Offset: mib}}
	sampleRE = &REntry{Name: "res1", Offset: 7 * mib}
)

// requestCase is a sample request of each command with libsanlock's length.
type requestCase struct {
	q      *Request
	length uint32 // length libsanlock puts in the header
	bytes  int    // bytes actually sent after the header
}

func requestCases() map[Cmd]requestCase {
	m := map[Cmd]requestCase{}
	add := func(q *Request, length uint32, n int) { m[q.Header.Cmd] = requestCase{q, length, n} }
	withLS := func(q *Request) *Request { q.Lockspace = sampleLS; return q }
	withRes := func(q *Request, r ...Resource) *Request { q.Resources = r; return q }
	withRI := func(q *Request, re bool) *Request {
		q.RIndex = sampleRI
		if re {
			q.REntry = sampleRE
		}
		return q
	}
	const L, R, D = LockspaceSize, ResourceSize, DiskSize

	add(NewRequest(CmdRegister, 0, 0, 0), 32, 0)
	add(withLS(NewRequest(CmdAddLockspace, AddAsync, 5, 0)), 32+L, L)
	add(withLS(NewRequest(CmdRemLockspace, RemAsync|RemUnused, 0, 0)), 32+L, L)
	add(NewRequest(CmdShutdown, 0, 1, 0), 32, 0)
	add(NewRequest(CmdStatus, 0, 3, 0), 32, 0)
	add(NewRequest(CmdLogDump, 0, 0, 0), 32, 0)
	acq := withRes(NewRequest(CmdAcquire, AcquireLVB|AcquireOrphan, 2, self), sampleRes("R1", 1), sampleRes("R2", 4))
	acq.Options = &Options{OwnerName: "owner", Flags: 0, Len: 0}
	add(acq, 32+R+D+R+4*D+OptionsSize, R+D+R+4*D+OptionsSize)
	add(withRes(NewRequest(CmdRelease, 0, 2, 1234), noDisks(sampleRes("R1", 1)), noDisks(sampleRes("R2", 2))), 32+2*R, 2*R)
	add(NewRequest(CmdInquire, 0, 0, self), 32, 0)
	add(NewRequest(CmdRestrict, RestrictSigterm, 0, self), 32, 0)
	add(withRes(NewRequest(CmdRequest, RequestNextLVer, ReqGraceful, 0), sampleRes("R1", 2)), 32+R+2*D, R+2*D)
	al := NewRequest(CmdAlign, 0, 0, 0)
	d := sampleDisk(0)
	al.Disk = &d
	add(al, 32+D, D)
	add(withLS(NewRequest(CmdExamineLockspace, 0, 0, 0)), 32+L, L)
	add(withRes(NewRequest(CmdExamineResource, 0, 0, 0), noDisks(sampleRes("R1", 1))), 32+R, R)
	add(withLS(NewRequest(CmdHostStatus, 0, 0, 0)), 32, L)
	add(withLS(NewRequest(CmdInqLockspace, InqWait, 0, 0)), 32+L, L)
	kp := NewRequest(CmdKillpath, KillpathPID, 0, self)
	kp.Killpath = &Killpath{Path: "/usr/bin/kill-me", Args: "a\\ b c"}
	add(kp, 32+KillpathSize, KillpathSize)
	add(withLS(NewRequest(CmdWriteLockspace, 0, 2000, 10)), 32+L, L)
	add(withRes(NewRequest(CmdWriteResource, WriteClear, 3, 5), sampleRes("R1", 1)), 32+R+D, R+D)
	add(withLS(NewRequest(CmdReadLockspace, 0, 0, 0)), 32+L, L)
	add(withRes(NewRequest(CmdReadResource, 0, 0, 0), sampleRes("", 1)), 32+R+D, R+D)
	add(NewRequest(CmdGetLockspaces, 0, 0, 0), 32, 0)
	add(withLS(NewRequest(CmdGetHosts, 0, 0, 0)), 32+L, L)
	add(withRes(NewRequest(CmdReadResourceOwners, 0, 0, 0), sampleRes("R1", 1)), 32+R+D, R+D)
	lvb := withRes(NewRequest(CmdSetLVB, 0, 0, 0), noDisks(sampleRes("R1", 1)))
	lvb.LVB = []byte("hello")
	add(lvb, 32+R+5, R+5)
	add(withRes(NewRequest(CmdGetLVB, 0, 0, 0), noDisks(sampleRes("R1", 1))), 32+R, R)
	add(withRes(NewRequest(CmdConvert, ConvertOwnerNowait, 0, 4321), noDisks(sampleRes("R1", 1))), 32+R, R)
	add(NewRequest(CmdVersion, 0, 0, 0), 32, 0)
	add(NewRequest(CmdShutdownWait, 0, 1, 0), 32, 0)
	re := withLS(NewRequest(CmdRegEvent, 0, 0, 0))
	re.HostEvent = &HostEvent{}
	add(re, 32+L+HostEventSize, L+HostEventSize)
	add(withLS(NewRequest(CmdEndEvent, 0, 0, 0)), 32+L, L)
	se := withLS(NewRequest(CmdSetEvent, SetevReplaceEvent, 0, 0))
	se.HostEvent = &HostEvent{HostID: 2, Generation: 3, Event: 4, Data: 5}
	add(se, 32+L+HostEventSize, L+HostEventSize)
	add(withLS(NewRequest(CmdSetConfig, 0, ConfigUnused, 0)), 32+L, L)
	add(withLS(NewRequest(CmdRenewal, 0, 0, 0)), 32, L)
	add(withRI(NewRequest(CmdFormatRIndex, 0, 0, 0), false), 32+RIndexSize, RIndexSize)
	add(withRI(NewRequest(CmdUpdateRIndex, RXUpAdd, 0, 0), true), 32+RIndexSize+REntrySize, RIndexSize+REntrySize)
	add(withRI(NewRequest(CmdLookupRIndex, 0, 0, 0), true), 32+RIndexSize+128, RIndexSize+REntrySize)
	add(withRI(NewRequest(CmdCreateResource, 0, 2000, 0), true), 32+RIndexSize+REntrySize, RIndexSize+REntrySize)
	add(withRI(NewRequest(CmdDeleteResource, 0, 0, 0), true), 32+RIndexSize+REntrySize, RIndexSize+REntrySize)
	add(withRI(NewRequest(CmdRebuildRIndex, RXNoLockspace, 0, 0), false), 32+RIndexSize, RIndexSize)
	acq2 := withRes(NewRequest(CmdAcquire2, 0, 1, self), sampleRes("R1", 1))
	acq2.Options = &Options{}
	add(acq2, 32+R+D+OptionsSize, R+D+OptionsSize)
	add(withLS(NewRequest(CmdReadLockspaceHost, 0, 0, 0)), 32+L, L)
	ilh := withLS(NewRequest(CmdInitLockspaceHost, 0, 0, 0))
	ilh.DeltaLeader = bytes.Repeat([]byte{7}, DeltaLeaderSize)
	add(ilh, 32+L+DeltaLeaderSize, L+DeltaLeaderSize)
	sh := withLS(NewRequest(CmdSetHost, 0, 1, 0))
	sh.Host = &Host{HostID: 2, Generation: 9, Flags: 0x10}
	add(sh, 32+L+HostSize, L+HostSize)
	return m
}

func TestRequestAllCommandsRoundTrip(t *testing.T) {
	cases := requestCases()
	if len(cases) != int(MaxCmd) {
		t.Fatalf("%d cases, want %d", len(cases), MaxCmd)
	}
	for cmd := CmdRegister; cmd <= MaxCmd; cmd++ {
		tc := cases[cmd]
		t.Run(cmd.DebugName(), func(t *testing.T) {
			b, err := tc.q.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if got := le.Uint32(b[hdrLength:]); got != tc.length {
				t.Errorf("length field %d, want %d", got, tc.length)
			}
			if len(b)-HeaderSize != tc.bytes {
				t.Errorf("payload %d bytes, want %d", len(b)-HeaderSize, tc.bytes)
			}
			// Append a trailing marker: the reader must stop exactly at the end.
			stream := append(append([]byte{}, b...), 0xAA)
			rd := bytes.NewReader(stream)
			got, err := ReadRequest(rd, 0)
			if err != nil {
				t.Fatal(err)
			}
			if rd.Len() != 1 {
				t.Fatalf("reader left %d bytes, want 1", rd.Len())
			}
			if got.Consumed != tc.bytes {
				t.Errorf("consumed %d", got.Consumed)
			}
			got.Consumed = 0
			if !reflect.DeepEqual(got, tc.q) {
				t.Errorf("round trip:\n got %+v\nwant %+v", got, tc.q)
			}
			again, err := got.MarshalBinary()
			if err != nil || !bytes.Equal(again, b) {
				t.Errorf("re-encode differs: %v", err)
			}
		})
	}
}

func TestReadRequestSentinels(t *testing.T) {
	good, _ := NewRequest(CmdStatus, 0, 0, 0).MarshalBinary()
	mod := func(off int, v uint32) []byte {
		b := append([]byte{}, good...)
		le.PutUint32(b[off:], v)
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"magic", mod(hdrMagic, 0x04282011), ErrBadMagic},
		{"version major 2", mod(hdrVersion, 0x00020000), ErrBadVersion},
		{"cmd 0", mod(hdrCmd, 0), ErrUnknownCmd},
		{"cmd 45", mod(hdrCmd, 45), ErrUnknownCmd},
		{"private cmd under sanlock magic", mod(hdrCmd, uint32(CmdReexec)), ErrUnknownCmd},
		{"sanlock cmd under private magic", mod(hdrMagic, PrivateMagic), ErrUnknownCmd},
		{"cmd 99", mod(hdrCmd, 99), ErrUnknownCmd},
		{"length near 2^32", mod(hdrLength, 0xFFFFFFF0), ErrPayloadTooLarge},
		{"length over max", mod(hdrLength, HeaderSize+DefaultMaxPayload+1), ErrPayloadTooLarge},
		{"empty", nil, io.EOF},
		{"short header", good[:10], io.ErrUnexpectedEOF},
	} {
		_, err := ReadRequest(bytes.NewReader(tc.b), 0)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v want %v", tc.name, err, tc.want)
		}
	}
	// VERSION is accepted with any version, also 0 and major 2.
	for _, v := range []uint32{0, 0x00020000} {
		b, _ := NewRequest(CmdVersion, 0, 0, 0).MarshalBinary()
		le.PutUint32(b[hdrVersion:], v)
		if _, err := ReadRequest(bytes.NewReader(b), 0); err != nil {
			t.Errorf("version %#x: %v", v, err)
		}
	}
	// Minor versions and version 0 are accepted for other commands.
	if _, err := ReadRequest(bytes.NewReader(mod(hdrVersion, 0)), 0); err != nil {
		t.Errorf("version 0: %v", err)
	}
	// A short payload is an unexpected EOF.
	b, _ := requestCases()[CmdAddLockspace].q.MarshalBinary()
	if _, err := ReadRequest(bytes.NewReader(b[:100]), 0); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short payload: %v", err)
	}
}

func TestReadRequestRejectAndDrain(t *testing.T) {
	// ACQUIRE with N = 9: -E2BIG before reading anything; drain the announced rest.
	q := NewRequest(CmdAcquire, 0, 0, self)
	for i := 0; i < 9; i++ {
		q.Resources = append(q.Resources, sampleRes("R", 1))
	}
	if _, err := q.MarshalBinary(); !errors.Is(err, ErrTooMany) {
		t.Fatalf("encoder accepted 9 resources: %v", err)
	}
	h := NewHeader(CmdAcquire, 0, 9, self)
	h.Length = HeaderSize + 100
	stream := append(h.Bytes(), make([]byte, 100)...)
	vh := NewHeader(CmdVersion, 0, 0, 0)
	stream = append(stream, vh.Bytes()...)
	rd := bytes.NewReader(stream)
	got, err := ReadRequest(rd, 0)
	var se *rescode.Error
	if !errors.As(err, &se) || se.Code != rescode.RvE2BIG || got == nil {
		t.Fatalf("got %v", err)
	}
	if n, err := Drain(rd, got, 0); n != 100 || err != nil {
		t.Fatalf("drain %d %v", n, err)
	}
	// The next message is intact.
	if next, err := ReadRequest(rd, 0); err != nil || next.Header.Cmd != CmdVersion {
		t.Fatalf("next: %v", err)
	}

	// num_disks 0 / 5: -ERANGE after the 128-byte resource.
	for _, nd := range []uint32{0, 5} {
		r := Resource{LockspaceName: "LS", Name: "R", NumDisks: nd}
		rh := NewHeader(CmdRequest, 0, 0, 0)
		b, _ := r.AppendBinary(rh.Bytes())
		le.PutUint32(b[hdrLength:], uint32(len(b)+7))
		b = append(b, make([]byte, 7)...)
		rd := bytes.NewReader(b)
		got, err := ReadRequest(rd, 0)
		if rescode.ErrorCode(err) != rescode.RvERANGE || got.Consumed != ResourceSize || got.DrainLen() != 7 {
			t.Errorf("num_disks %d: %v consumed %d", nd, err, got.Consumed)
		}
	}

	// SET_LVB larger than 4096: -E2BIG.
	r := Resource{LockspaceName: "LS", Name: "R", NumDisks: 1}
	lh := NewHeader(CmdSetLVB, 0, 0, 0)
	b, _ := r.AppendBinary(lh.Bytes())
	le.PutUint32(b[hdrLength:], HeaderSize+ResourceSize+MaxLVB+1)
	b = append(b, make([]byte, MaxLVB+1)...)
	rd = bytes.NewReader(b)
	got, err = ReadRequest(rd, 0)
	if rescode.ErrorCode(err) != rescode.RvE2BIG || got.DrainLen() != MaxLVB+1 {
		t.Fatalf("lvb: %v", err)
	}
	// Drain is bounded.
	if n, _ := Drain(rd, got, 10); n != 10 {
		t.Fatalf("bounded drain %d", n)
	}
}

// TestReadRequestRandom feeds 10,000 random messages; none may panic, and
// pure noise must give errors.
func TestReadRequestRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	errs := 0
	for i := 0; i < 10000; i++ {
		b := make([]byte, rng.Intn(2*HeaderSize+LockspaceSize))
		rng.Read(b)
		if i%2 == 1 && len(b) >= HeaderSize {
			// Half the inputs get a valid magic/version and a random
			// command so the payload decoders are reached too.
			le.PutUint32(b[hdrMagic:], Magic)
			le.PutUint32(b[hdrVersion:], ProtoVersion)
			le.PutUint32(b[hdrCmd:], uint32(rng.Intn(45)))
			le.PutUint32(b[hdrData:], uint32(rng.Intn(12)))
		}
		_, err := ReadRequest(bytes.NewReader(b), 0)
		if err != nil {
			errs++
		} else if i%2 == 0 {
			t.Fatalf("random message %x accepted", b)
		}
	}
	if errs < 5000 {
		t.Fatalf("only %d errors", errs)
	}
}

// TestPrivateCommands: a private command is sent under PrivateMagic with
// no payload, read back as itself, and its reply is read under the same
// magic; the number alone, under sanlock's magic, is an unknown command.
func TestPrivateCommands(t *testing.T) {
	b, err := NewRequest(CmdReexec, 0, 0, 0).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != HeaderSize || le.Uint32(b[hdrMagic:]) != PrivateMagic || string(b[:4]) != "GOSL" {
		t.Fatalf("reexec request % x", b)
	}
	q, err := ReadRequest(bytes.NewReader(b), 0)
	if err != nil || q.Header.Cmd != CmdReexec || q.Consumed != 0 {
		t.Fatalf("read back: %+v %v", q, err)
	}
	if !CmdReexec.Private() || CmdReexec.Sanlock() || Cmd(41).Private() || !Cmd(41).Sanlock() {
		t.Error("Private/Sanlock")
	}
	rep := Reply{Header: ResultReply(q.Header, -11), Records: []StateRecord{{State: State{Type: StateDaemon}, Text: "why"}}}
	rb, err := rep.MarshalBinary(CmdReexec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadReply(bytes.NewReader(rb), CmdReexec)
	if err != nil || got.Result() != -11 || len(got.Records) != 1 || got.Records[0].Text != "why" {
		t.Fatalf("reply: %+v %v", got, err)
	}
	// A reply under sanlock's magic is not an answer to a private command.
	le.PutUint32(rb[hdrMagic:], Magic)
	if _, err := ReadReply(bytes.NewReader(rb), CmdReexec); !errors.Is(err, ErrBadMagic) {
		t.Errorf("sanlock magic on a private reply: %v", err)
	}
}
