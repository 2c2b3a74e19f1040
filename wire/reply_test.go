package wire

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/gosanlock/gosanlock/rescode"
)

// replyCases returns a sample reply for every command that has one.
func replyCases() map[Cmd]*Reply {
	m := map[Cmd]*Reply{}
	for cmd := CmdRegister; cmd <= MaxCmd; cmd++ {
		if !HasReply(cmd) {
			continue
		}
		p := &Reply{Header: ResultReply(NewHeader(cmd, 0, 0, 0), 0)}
		switch cmd {
		case CmdStatus, CmdHostStatus, CmdRenewal:
			r := sampleRes("R", 1)
			p.Records = []StateRecord{
				{State: State{Type: StateDaemon, Name: "h", StrLen: 4}, Text: "a=b"},
				{State: State{Type: StateLockspace, Name: "LS", StrLen: 12}, Text: "list=spaces", Lockspace: sampleLS},
				{State: State{Type: StateResource, Name: "R", StrLen: 10}, Text: "list=held", Resource: &r},
			}
		case CmdLogDump:
			p.Data = []byte("line one\nline two\n")
		case CmdInquire:
			p.Data = []byte("LS:R1:/p:1048576:2")
			p.Header.Data2 = 1
		case CmdReadLockspace:
			p.Lockspace = sampleLS
			p.Header.Data2 = 10
		case CmdReadResource:
			r := noDisks(sampleRes("R", 1))
			p.Resource = &r
		case CmdGetLockspaces:
			p.Lockspaces = []Lockspace{*sampleLS, {Name: "B", HostID: 1, Flags: LSFAdd}}
		case CmdGetHosts:
			p.Hosts = []Host{{HostID: 1, Generation: 2, Timestamp: 3, IOTimeout: 10, Flags: HostLive}}
		case CmdReadResourceOwners:
			r := noDisks(sampleRes("R", 1))
			p.Resource = &r
			p.Hosts = []Host{{HostID: 1, Generation: 2}, {HostID: 4, Generation: 1}}
		case CmdGetLVB:
			p.Data = make([]byte, 512)
			copy(p.Data, "hello")
		case CmdUpdateRIndex, CmdLookupRIndex, CmdCreateResource, CmdDeleteResource:
			p.REntry = sampleRE
		case CmdAlign:
			p.Header.Data = mib
		case CmdVersion:
			p.Header = VersionReply(DaemonVersion)
		case CmdReadLockspaceHost:
			p.Lockspace = sampleLS
			p.Host = &Host{HostID: 1, Generation: 3, Timestamp: 99, IOTimeout: 10}
			p.Header.Data2 = 10
		case CmdAcquire2:
			p.Header.Data = uint32(0xffffff0d) // -243
			p.Header.Data2 = 0xffffffff
			p.Host = &Host{HostID: 2, Generation: 1, Timestamp: 1234, Flags: HostLive}
			p.OwnerName = "hostA"
		}
		m[cmd] = p
	}
	return m
}

func TestReplyAllCommandsRoundTrip(t *testing.T) {
	for cmd, want := range replyCases() {
		t.Run(cmd.DebugName(), func(t *testing.T) {
			b, err := want.MarshalBinary(cmd)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeReply(cmd, b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
			}
			again, _ := got.MarshalBinary(cmd)
			if !bytes.Equal(again, b) {
				t.Errorf("re-encode differs")
			}
		})
	}
}

func TestReplyLengths(t *testing.T) {
	cases := replyCases()
	for _, tc := range []struct {
		cmd    Cmd
		length uint32
	}{
		{CmdStatus, 32},
		{CmdLogDump, 32},
		{CmdInquire, 32 + 19},
		{CmdReadLockspace, 32 + LockspaceSize},
		{CmdReadResource, 32 + ResourceSize},
		{CmdGetLockspaces, 32 + 2*LockspaceSize},
		{CmdGetHosts, 32 + HostSize},
		{CmdReadResourceOwners, 32 + ResourceSize + 2*HostSize},
		{CmdGetLVB, 32 + 512},
		{CmdLookupRIndex, 32 + REntrySize},
		{CmdAddLockspace, 32},
	} {
		b, _ := cases[tc.cmd].MarshalBinary(tc.cmd)
		var h Header
		_ = h.Decode(b)
		if h.Length != tc.length {
			t.Errorf("%s: length %d want %d", tc.cmd, h.Length, tc.length)
		}
	}
	// LOG_DUMP: data = byte count.
	b, _ := cases[CmdLogDump].MarshalBinary(CmdLogDump)
	if le.Uint32(b[hdrData:]) != 18 {
		t.Errorf("log_dump data %d", le.Uint32(b[hdrData:]))
	}
	// INQUIRE formatting error: 33-byte reply, data2 = count.
	h := ResultReply(NewHeader(CmdInquire, 0, 0, self), rescode.RvELIBSCN)
	h.Data2 = 1
	b, _ = (&Reply{Header: h, Data: []byte{}}).MarshalBinary(CmdInquire)
	if len(b) != 33 || le.Uint32(b[hdrLength:]) != 33 {
		t.Errorf("inquire -81: %d bytes", len(b))
	}
	p, err := DecodeReply(CmdInquire, b)
	if err != nil || rescode.ErrorCode(p.Err()) != rescode.RvELIBSCN || p.Header.Data2 != 1 {
		t.Errorf("inquire -81 decode: %+v %v", p, err)
	}
	// GET_LVB error: no payload.
	h = ResultReply(NewHeader(CmdGetLVB, 0, 0, 0), rescode.RvENOENT)
	b, _ = (&Reply{Header: h}).MarshalBinary(CmdGetLVB)
	if len(b) != 32 {
		t.Errorf("get_lvb error %d bytes", len(b))
	}
	// Final SHUTDOWN_WAIT reply: cmd 0.
	fin := ShutdownWaitFinalReply()
	if p, err := DecodeReply(CmdShutdownWait, fin.Bytes()); err != nil || p.Result() != 0 || p.Header.Cmd != 0 {
		t.Errorf("shutdown_wait final: %v", err)
	}
}

func TestReadReplyErrors(t *testing.T) {
	cases := replyCases()
	// Truncation at every point of a streamed or counted reply gives an
	// error (EOF exactly at a record boundary ends a stream normally).
	for _, cmd := range []Cmd{CmdGetLockspaces, CmdReadResourceOwners, CmdInquire, CmdLookupRIndex, CmdReadLockspace} {
		b, _ := cases[cmd].MarshalBinary(cmd)
		for n := 0; n < len(b); n++ {
			if _, err := DecodeReply(cmd, b[:n]); err == nil {
				t.Fatalf("%s truncated at %d accepted", cmd, n)
			}
		}
	}
	b, _ := cases[CmdStatus].MarshalBinary(CmdStatus)
	if _, err := DecodeReply(CmdStatus, b[:len(b)-1]); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("status truncated: %v", err)
	}
	// Bad magic.
	bad := append([]byte{}, b...)
	bad[0] = 0
	if _, err := DecodeReply(CmdStatus, bad); !errors.Is(err, ErrBadMagic) {
		t.Errorf("magic: %v", err)
	}
	// Counts that disagree with the length, and huge counts.
	h := ResultReply(NewHeader(CmdGetHosts, 0, 0, 0), 0)
	h.Data2 = 0xFFFFFFFF
	h.Length = 0xFFFFFFE0
	if _, err := DecodeReply(CmdGetHosts, h.Bytes()); err == nil {
		t.Errorf("huge get_hosts accepted")
	}
	h = ResultReply(NewHeader(CmdLogDump, 0, 0, 0), 0)
	h.Data = 0x7FFFFFFF
	if _, err := DecodeReply(CmdLogDump, h.Bytes()); !errors.Is(err, ErrTooMany) {
		t.Errorf("huge log_dump: %v", err)
	}
	h = ResultReply(NewHeader(CmdLogDump, 0, 0, 0), 0)
	h.Data = 1 << 20
	if _, err := DecodeReply(CmdLogDump, h.Bytes()); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short log_dump: %v", err)
	}
	// Negative results skip payloads the daemon does not send.
	for _, cmd := range []Cmd{CmdReadLockspace, CmdGetLVB, CmdLookupRIndex, CmdReadResourceOwners} {
		h := ResultReply(NewHeader(cmd, 0, 0, 0), int32(rescode.ErrLeaderMagic))
		p, err := DecodeReply(cmd, h.Bytes())
		if err != nil || rescode.ErrorCode(p.Err()) != int(rescode.ErrLeaderMagic) {
			t.Errorf("%s error reply: %v", cmd, err)
		}
	}
	if _, err := DecodeReply(Cmd(0), nil); !errors.Is(err, ErrUnknownCmd) {
		t.Errorf("cmd 0: %v", err)
	}
}
