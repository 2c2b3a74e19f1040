package client

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/gosanlock/gosanlock/wire"
)

// Byte-exact checks against the annotated captures of docs/protocol.md "Captures".

// unhex parses the hex dumps of the spec ("10 20 28 04 | 01 00 ...").
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	s = strings.NewReplacer("|", "", " ", "", "\n", "", "\t", "").Replace(s)
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// diff reports the first differing offset.
func diff(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	n := min(len(got), len(want))
	for i := 0; i < n; i++ {
		if got[i] != want[i] {
			t.Fatalf("%s: first difference at offset %#x: got %#02x want %#02x (len got %d want %d)", what, i, got[i], want[i], len(got), len(want))
		}
	}
	t.Fatalf("%s: length got %d want %d", what, len(got), len(want))
}

const capPath = "/mnt/shared0/leases"

// capLockspace is the 1104-byte lockspace of the captures, built from the
// annotated offsets.
func capLockspace(name string, hostID byte, path string) []byte {
	b := make([]byte, LockspaceSize)
	copy(b[0:], name)
	b[0x30] = hostID
	copy(b[0x40:], path)
	return b
}

func TestCaptureAddLockspace(t *testing.T) { // docs/protocol.md "Captures"
	want := unhex(t, `10 20 28 04 | 01 00 00 00 | 02 00 00 00 | 00 00 00 00
	                  70 04 00 00 | 00 00 00 00 | 00 00 00 00 | 00 00 00 00`)
	want = append(want, capLockspace("LS", 1, capPath)...)
	q := NewRequest(CmdAddLockspace, 0, 0, 0)
	q.Lockspace = &Lockspace{Name: "LS", HostID: 1, Disk: Disk{Path: capPath}}
	got, err := q.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "add_lockspace", got, want)

	reply := unhex(t, `10 20 28 04 01 00 00 00 02 00 00 00 00 00 00 00
	                   20 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00`)
	p, err := DecodeReply(CmdAddLockspace, reply)
	if err != nil || p.Result() != 0 {
		t.Fatalf("reply: %+v %v", p, err)
	}
	rq, err := wire.ReadRequest(bytes.NewReader(want), 0)
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := (&Reply{Header: wire.ResultReply(rq.Header, 0)}).MarshalBinary(CmdAddLockspace)
	diff(t, "add_lockspace reply", enc, reply)
}

func TestCaptureAcquireInquire(t *testing.T) { // docs/protocol.md "Captures"
	reg := unhex(t, "10 20 28 04 01 00 00 00 01 00 00 00 00 00 00 00 20 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00")
	got, _ := NewRequest(CmdRegister, 0, 0, 0).MarshalBinary()
	diff(t, "register", got, reg)

	want := unhex(t, `10 20 28 04 01 00 00 00 07 00 00 00 01 00 00 00
	                  e8 04 00 00 00 00 00 00 01 00 00 00 ff ff ff ff`)
	res := make([]byte, ResourceSize)
	copy(res[0:], "LS")
	copy(res[0x30:], "R3")
	copy(res[0x70:], unhex(t, "00 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00"))
	disk := make([]byte, DiskSize)
	copy(disk, capPath)
	copy(disk[0x400:], unhex(t, "00 00 30 00 00 00 00 00"))
	want = append(want, res...)
	want = append(want, disk...)
	want = append(want, make([]byte, OptionsSize)...)

	q := acquireReq(self, []Resource{{LockspaceName: "LS", Name: "R3",
		Disks: []Disk{{Path: capPath, Offset: 3145728}}}}, AcquireLVB, nil)
	got, err := q.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "acquire", got, want)

	acqReply := unhex(t, "10 20 28 04 01 00 00 00 07 00 00 00 01 00 00 00 20 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00")
	rq, err := wire.ReadRequest(bytes.NewReader(want), 0)
	if err != nil || len(rq.Resources) != 1 || rq.Resources[0].Disks[0].Offset != 3145728 || rq.Options == nil {
		t.Fatalf("wire.ReadRequest(acquire) = %+v %v", rq, err)
	}
	enc, _ := (&Reply{Header: wire.ResultReply(rq.Header, 0)}).MarshalBinary(CmdAcquire)
	diff(t, "acquire reply", enc, acqReply)

	inq := unhex(t, "10 20 28 04 01 00 00 00 09 00 00 00 00 00 00 00 | 20 00 00 00 00 00 00 00 00 00 00 00 ff ff ff ff")
	got, _ = NewRequest(CmdInquire, 0, 0, self).MarshalBinary()
	diff(t, "inquire", got, inq)

	state := "LS:R3:/mnt/shared0/leases:3145728:1"
	inqReply := unhex(t, "10 20 28 04 01 00 00 00 09 00 00 00 00 00 00 00 | 44 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00")
	inqReply = append(append(inqReply, state...), 0)
	if len(inqReply) != 0x44 {
		t.Fatalf("capture length %d", len(inqReply))
	}
	p, err := DecodeReply(CmdInquire, inqReply)
	if err != nil || string(p.Data) != state || p.Header.Data2 != 1 {
		t.Fatalf("inquire reply = %+v %v", p, err)
	}
	rq, _ = wire.ReadRequest(bytes.NewReader(inq), 0)
	h := wire.ResultReply(rq.Header, 0)
	h.Data2 = 1
	enc, _ = (&Reply{Header: h, Data: []byte(state)}).MarshalBinary(CmdInquire)
	diff(t, "inquire reply", enc, inqReply)
	if rs, err := ParseState(string(p.Data)); err != nil || len(rs) != 1 || rs[0].LVer != 1 || rs[0].Disks[0].Offset != 3145728 {
		t.Fatalf("ParseState = %+v %v", rs, err)
	}
}

func TestCaptureStatus(t *testing.T) { // docs/protocol.md "Captures"
	req := unhex(t, "10 20 28 04 01 00 00 00 05 00 00 00 00 00 00 00 20 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00")
	got, _ := NewRequest(CmdStatus, 0, 0, 0).MarshalBinary()
	diff(t, "status", got, req)

	// Reply header, then a trimmed record stream with the annotated fields.
	stream := unhex(t, "10 20 28 04 01 00 00 00 05 00 00 00 00 00 00 00 20 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00")
	rec := func(typ, data32 uint32, data64 uint64, name, text string, tail []byte) {
		b := make([]byte, StateSize)
		le.PutUint32(b[0:], typ)
		le.PutUint32(b[8:], data32)
		le.PutUint64(b[16:], data64)
		copy(b[0x18:], name)
		le.PutUint32(b[0x48:], uint32(len(text)+1))
		stream = append(stream, b...)
		stream = append(append(stream, text...), 0)
		stream = append(stream, tail...)
	}
	lsTail := capLockspace("LS", 1, capPath)
	copy(lsTail[64+1032:], unhex(t, "00 02 00 00 0b 00 00 00"))
	resTail := make([]byte, ResourceSize)
	copy(resTail, "LS")
	copy(resTail[48:], "R1")
	le.PutUint32(resTail[124:], 1)
	d := make([]byte, DiskSize)
	copy(d, capPath)
	copy(d[1024:], unhex(t, "00 00 10 00 00 00 00 00 00 02 00 00 ff ff ff ff"))
	resTail = append(resTail, d...)
	rec(StateDaemon, 0, 0, "a5f2a5f9-host.vm", "our_host_name=x smproto_hex=00000001", nil)
	rec(StateClient, 0xffffffff, 0, "helper", "ci=0 fd=5 pid=-1", nil)
	rec(StateClient, 11940, 0, "", "ci=2 fd=9 pid=11940 cmd_last=7", nil)
	rec(StateLockspace, 0, 1, "LS", "list=spaces space_id=1", lsTail)
	rec(StateResource, 11940, 1, "R1", "list=held flags=0 sector_size=512 align_size=1048576 lver=1", resTail)

	p, err := DecodeReply(CmdStatus, stream)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Records) != 5 {
		t.Fatalf("%d records", len(p.Records))
	}
	r := p.Records
	if r[1].Name != "helper" || int32(r[1].Data32) != -1 || r[2].Data32 != 11940 || r[2].Name != "" {
		t.Errorf("client records %+v %+v", r[1], r[2])
	}
	if r[3].Lockspace == nil || r[3].Lockspace.Disk.Pad1 != 512 || r[3].Lockspace.Disk.Pad2 != 11 {
		t.Errorf("lockspace record %+v", r[3])
	}
	if r[4].Resource == nil || ResourceString(r[4].Resource) != "LS:R1:/mnt/shared0/leases:1048576:0" ||
		r[4].Data64 != 1 || r[4].Resource.Disks[0].Pad2 != 0xffffffff {
		t.Errorf("resource record %+v", r[4])
	}
	// Re-encoding the records reproduces the stream.
	enc, err := p.MarshalBinary(CmdStatus)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "status stream", enc, stream)
}

func TestCaptureVersion(t *testing.T) { // docs/protocol.md "Captures"
	req := unhex(t, "10 20 28 04 01 00 00 00 1c 00 00 00 00 00 00 00 20 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00")
	got, _ := NewRequest(CmdVersion, 0, 0, 0).MarshalBinary()
	diff(t, "version", got, req)
	reply := unhex(t, "10 20 28 04 01 00 00 00 1c 00 00 00 00 00 00 00 20 00 00 00 00 00 00 00 00 00 00 00 00 05 08 03")
	h := wire.VersionReply(DaemonVersion)
	diff(t, "version reply", h.Bytes(), reply)
	p, err := DecodeReply(CmdVersion, reply)
	if err != nil || p.Header.Data2 != 0x03080500 || p.Header.Version != 1 {
		t.Fatalf("%+v %v", p, err)
	}
}

func TestCaptureHostStatus(t *testing.T) { // docs/protocol.md "Captures"
	want := unhex(t, "10 20 28 04 01 00 00 00 0f 00 00 00 00 00 00 00 20 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00")
	want = append(want, capLockspace("LS", 0, "")...)
	q := NewRequest(CmdHostStatus, 0, 0, 0)
	q.Lockspace = &Lockspace{Name: "LS"}
	got, _ := q.MarshalBinary()
	diff(t, "host_status", got, want)
	// The daemon reads the lockspace although length says 32.
	rq, err := wire.ReadRequest(bytes.NewReader(want), 0)
	if err != nil || rq.Lockspace.Name != "LS" || rq.Consumed != LockspaceSize || rq.DrainLen() != 0 {
		t.Fatalf("%+v %v", rq, err)
	}

	text := "last_check=548 last_live=548 last_req=0 owner_id=1 owner_generation=1 timestamp=526 io_timeout=10 owner_name=a5f2.vm"
	rep := Reply{Header: wire.ResultReply(rq.Header, 0), Records: []StateRecord{{
		State: State{Type: StateHost, Data32: 1, Data64: 0x20e}, Text: text}}}
	enc, _ := rep.MarshalBinary(CmdHostStatus)
	hdr := unhex(t, "10 20 28 04 01 00 00 00 0f 00 00 00 00 00 00 00 20 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00")
	diff(t, "host_status reply header", enc[:HeaderSize], hdr)
	p, err := DecodeReply(CmdHostStatus, enc)
	if err != nil || len(p.Records) != 1 || p.Records[0].Text != text || p.Records[0].Data64 != 526 {
		t.Fatalf("%+v %v", p, err)
	}
}

func TestCaptureEvents(t *testing.T) { // docs/protocol.md "Captures"
	want := unhex(t, "10 20 28 04 01 00 00 00 1e 00 00 00 00 00 00 00 90 04 00 00 00 00 00 00 00 00 00 00 00 00 00 00")
	want = append(want, capLockspace("LS", 0, "")...)
	want = append(want, make([]byte, HostEventSize)...)
	q := NewRequest(CmdRegEvent, 0, 0, 0)
	q.Lockspace = &Lockspace{Name: "LS"}
	got, _ := q.MarshalBinary()
	diff(t, "reg_event", got, want)

	cb := unhex(t, `10 20 28 04 01 00 00 00 01 00 00 00 00 00 00 00
	                50 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
	                01 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
	                77 00 00 00 00 00 00 00 99 00 00 00 00 00 00 00
	                02 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00`)
	var ev EventCB
	if err := ev.UnmarshalBinary(cb); err != nil {
		t.Fatal(err)
	}
	if ev.HostEvent != (HostEvent{HostID: 1, Event: 0x77, Data: 0x99}) || ev.FromHostID != 2 || ev.FromGeneration != 1 {
		t.Fatalf("%+v", ev)
	}
	mk := NewEventCB(HostEvent{HostID: 1, Event: 0x77, Data: 0x99}, 2, 1)
	enc, _ := mk.MarshalBinary()
	diff(t, "event_cb", enc, cb)
}

func TestCaptureLVB(t *testing.T) { // docs/protocol.md "Captures"
	res := Resource{LockspaceName: "LS", Name: "R3", Disks: []Disk{{Path: capPath, Offset: 3145728}}}
	q := NewRequest(CmdSetLVB, 0, 0, 0)
	q.Resources = []Resource{res}
	q.LVB = []byte("hello")
	got, _ := q.MarshalBinary()
	if len(got) != 0xa5 || q.Header.Length != 0xa5 || le.Uint32(got[HeaderSize+124:]) != 1 {
		t.Fatalf("set_lvb length %#x header %#x", len(got), q.Header.Length)
	}
	rq, err := wire.ReadRequest(bytes.NewReader(got), 0)
	if err != nil || string(rq.LVB) != "hello" || rq.Resources[0].NumDisks != 1 || rq.Resources[0].Disks != nil {
		t.Fatalf("%+v %v", rq, err)
	}

	g := NewRequest(CmdGetLVB, 0, 0, 0)
	g.Resources = []Resource{res}
	got, _ = g.MarshalBinary()
	if len(got) != 0xa0 || g.Header.Length != 0xa0 || g.Header.Data2 != 0 {
		t.Fatalf("get_lvb length %#x", len(got))
	}
	lvb := make([]byte, 512)
	copy(lvb, "hello")
	rep := Reply{Header: wire.ResultReply(g.Header, 0), Data: lvb}
	enc, _ := rep.MarshalBinary(CmdGetLVB)
	if le.Uint32(enc[hdrLength:]) != 0x220 {
		t.Fatalf("get_lvb reply length %#x", le.Uint32(enc[hdrLength:]))
	}
	p, err := DecodeReply(CmdGetLVB, enc)
	if err != nil || !bytes.Equal(p.Data, lvb) {
		t.Fatalf("%v", err)
	}
}
