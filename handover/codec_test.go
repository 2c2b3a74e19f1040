package handover

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sampleState is a state with one of everything.
func sampleState() *State {
	leader := Leader{Magic: 0x6152010, Version: 0x30002, SectorSize: 512, NumHosts: 2000, MaxHosts: 2000,
		OwnerID: 1, OwnerGeneration: 3, Lver: 7, SpaceName: "ls1", ResourceName: "r1", Timestamp: 1234, IOTimeout: 10}
	dleader := Leader{Magic: 0x12212010, Version: 0x30001, SectorSize: 512, NumHosts: 2000, MaxHosts: 2000,
		OwnerID: 1, OwnerGeneration: 3, SpaceName: "ls1", ResourceName: "host1", Timestamp: 1234, IOTimeout: 10,
		Raw: bytes.Repeat([]byte{0x5a}, LeaderSize)}
	return &State{
		NumFDs:     4,
		OldPid:     4242,
		OldVersion: "gosanlock test",
		BootID:     "",
		TakenMono:  1e9,
		TakenWall:  1.7e18,
		Config: Config{Args: []string{"daemon", "-w", "0"}, RunDir: "/run/sanlock", SocketPath: "/run/sanlock/sanlock.sock",
			PidFile: "/run/sanlock/sanlock.pid", UID: 0, GID: 0, HostName: "host1",
			Values: map[string]string{"renewal_history_size": "180"}},
		Listener: Listener{FD: 0, Path: "/run/sanlock/sanlock.sock"},
		PidFile:  PidFile{FD: -1, Path: "/run/sanlock/sanlock.pid"},
		Clients: []Client{
			{FD: 1, Slot: 2, PeerPid: 100, Registered: true, Pid: 100, Name: "holder", Restrict: 0,
				EventLockspace: "ls1", PendingEvents: []Event{{HostID: 1, Generation: 3, Event: 1, Data: 2, FromHostID: 2, FromGen: 5}}},
			{FD: 2, Slot: 3, PeerPid: 101, Pid: -1, Name: "cmd"},
		},
		Lockspaces: []Lockspace{{
			Name: "ls1", HostID: 1, Path: "/var/tmp/x-lease", Offset: 0, IOTimeout: 10, SectorSize: 512, AlignSize: 1 << 20,
			Generation: 3, Timestamp: 1234, LastRenewalAgo: 3 * time.Second, LastRenewalWall: 1.7e18, Leader: dleader, AcquireLastSuccess: 1100,
			History: []Renewal{{Timestamp: 1214, ReadMs: 1, WriteMs: 2}, {Timestamp: 1234, ReadMs: -1}},
			Hosts:   []Host{{HostID: 2, Generation: 5, Timestamp: 999, IOTimeout: 10, OwnerName: "host2", State: 3, LastLiveAgo: time.Second}},
			Wdmd:    &WdmdSession{FD: 3, Name: "sanlock_ls1:1", Active: true, Expire: 80},
			Event:   &Event{HostID: 2, Generation: 5, Event: 1},
		}},
		Tokens: []Token{
			{Lease: Lease{Lockspace: "ls1", Resource: "r1", Disks: []Disk{{Path: "/var/tmp/x-res", Offset: 1 << 20}}, Mode: ModeEX, Lver: 7, Leader: leader,
				Hold: &Hold{Dblock: Dblock{Mbal: 2001, Bal: 2001, Inp: 1, Inp2: 3, Inp3: 1200, Lver: 7}, SectorSize: 512, AlignSize: 1 << 20}}, Client: 0, Pid: 100},
			{Lease: Lease{Lockspace: "ls1", Resource: "r2", Disks: []Disk{{Path: "/var/tmp/x-res", Offset: 2 << 20}}, Mode: ModeSH, Lver: 1}, Client: 0, Pid: 100},
		},
		Orphans: []Orphan{{Lease: Lease{Lockspace: "ls1", Resource: "r2", Disks: []Disk{{Path: "/var/tmp/x-res", Offset: 2 << 20}}, Mode: ModeSH, Lver: 1, Flags: 1}, Pid: 99}},
	}
}

// seal builds a blob with a valid checksum around any payload.
func seal(version uint32, payload []byte) []byte {
	b := make([]byte, headerSize+len(payload))
	copy(b, stateMagic[:])
	binary.LittleEndian.PutUint32(b[8:], version)
	binary.LittleEndian.PutUint64(b[16:], uint64(len(payload)))
	copy(b[headerSize:], payload)
	sum := blobSum(b[:24], payload)
	copy(b[24:], sum[:])
	return b
}

func TestRoundTrip(t *testing.T) {
	s := sampleState()
	b, err := Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip changed the state:\n got %+v\nwant %+v", got, s)
	}
}

type rejectCase struct {
	name string
	blob []byte
	want error
	text string
}

// rejectCases are blobs Decode must refuse, with the error and a piece
// of its text. They also seed the fuzz corpus (TestWriteSeedCorpus).
func rejectCases(t testing.TB) []rejectCase {
	good, err := Encode(sampleState())
	if err != nil {
		t.Fatal(err)
	}
	payload := good[headerSize:]
	flip := func(off int) []byte {
		b := bytes.Clone(good)
		b[off] ^= 0x40
		return b
	}
	withFlags := bytes.Clone(good)
	binary.LittleEndian.PutUint32(withFlags[12:], 1)
	sum := blobSum(withFlags[:24], payload)
	copy(withFlags[24:], sum[:])
	mutate := func(f func(s *State)) []byte {
		s := sampleState()
		f(s)
		p, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		return seal(FormatVersion, p)
	}
	return []rejectCase{
		{"empty", nil, ErrNotState, "shorter than"},
		{"short", good[:headerSize-1], ErrNotState, "shorter than"},
		{"magic", flip(0), ErrNotState, "bad magic"},
		{"truncated", good[:len(good)-1], ErrNotState, "payload bytes"},
		{"extended", append(bytes.Clone(good), ' '), ErrNotState, "payload bytes"},
		{"payload bit", flip(headerSize + 10), ErrChecksum, "checksum"},
		{"version bit", flip(8), ErrChecksum, "checksum"},
		{"checksum bit", flip(30), ErrChecksum, "checksum"},
		{"version 0", seal(0, payload), ErrVersion, "version 0"},
		{"newer version", seal(FormatVersion+1, payload), ErrVersion, "reads 1..2"},
		{"flags", withFlags, ErrNotState, "flags"},
		{"too large", make([]byte, MaxStateSize+1), ErrTooLarge, "limit"},
		{"null", seal(1, []byte("null")), ErrInvalid, "not a JSON object"},
		{"array", seal(1, []byte("[]")), ErrInvalid, "not a JSON object"},
		{"trailing", seal(1, append(bytes.Clone(payload), []byte(" {}")...)), ErrInvalid, "trailing"},
		{"unknown field", seal(1, []byte(`{"NumFDs":1,"Bogus":1}`)), ErrInvalid, "unknown field"},
		{"wrong type", seal(1, []byte(`{"NumFDs":"1"}`)), ErrInvalid, "NumFDs"},
		{"no fds", seal(1, []byte(`{}`)), ErrInvalid, "NumFDs 0"},
		{"fd out of range", mutate(func(s *State) { s.Clients[1].FD = 4 }), ErrInvalid, "out of range"},
		{"fd twice", mutate(func(s *State) { s.Clients[1].FD = 0 }), ErrInvalid, "used twice"},
		{"pid file fd twice", mutate(func(s *State) { s.PidFile.FD = 0 }), ErrInvalid, "pid file: fd index 0 used twice"},
		{"wdmd fd twice", mutate(func(s *State) { s.Lockspaces[0].Wdmd.FD = 1 }), ErrInvalid, "used twice"},
		{"slot twice", mutate(func(s *State) { s.Clients[1].Slot = 2 }), ErrInvalid, "slot"},
		{"token client", mutate(func(s *State) { s.Tokens[0].Client = 5 }), ErrInvalid, "client index"},
		{"token unregistered", mutate(func(s *State) { s.Tokens[0].Client = 1 }), ErrInvalid, "does not hold"},
		{"token pid", mutate(func(s *State) { s.Tokens[0].Pid = 7 }), ErrInvalid, "does not hold"},
		{"two EX", mutate(func(s *State) { s.Tokens[1].Resource = "r1" }), ErrInvalid, "held EX and"},
		{"EX orphan", mutate(func(s *State) { s.Orphans[0].Mode = ModeEX }), ErrInvalid, "held SH and EX"},
		{"mode", mutate(func(s *State) { s.Tokens[1].Mode = 3 }), ErrInvalid, "mode 3"},
		{"no disks", mutate(func(s *State) { s.Tokens[1].Disks = nil }), ErrInvalid, "0 disks"},
		{"unknown lockspace", mutate(func(s *State) { s.Orphans[0].Lockspace = "ls2" }), ErrInvalid, "not joined"},
		{"lockspace twice", mutate(func(s *State) { s.Lockspaces = append(s.Lockspaces, s.Lockspaces[0]); s.Lockspaces[1].Wdmd = nil }), ErrInvalid, "joined twice"},
		{"long name", mutate(func(s *State) { s.Lockspaces[0].Name = strings.Repeat("n", 49) }), ErrInvalid, "49 bytes"},
		{"NUL name", mutate(func(s *State) { s.Tokens[0].Resource = "r\x001" }), ErrInvalid, "NUL"},
		{"host_id", mutate(func(s *State) { s.Lockspaces[0].HostID = 2001 }), ErrInvalid, "host_id"},
		{"sector", mutate(func(s *State) { s.Lockspaces[0].SectorSize = 1024 }), ErrInvalid, "sector size"},
		{"align", mutate(func(s *State) { s.Lockspaces[0].AlignSize = 3 << 20 }), ErrInvalid, "align size"},
		{"io_timeout", mutate(func(s *State) { s.Lockspaces[0].IOTimeout = 0 }), ErrInvalid, "io_timeout"},
		{"future renewal", mutate(func(s *State) { s.Lockspaces[0].LastRenewalAgo = -1 }), ErrInvalid, "future"},
		{"event space", mutate(func(s *State) { s.Clients[0].EventLockspace = "nope" }), ErrInvalid, "not joined"},
		{"orphan pid", mutate(func(s *State) { s.Orphans[0].Pid = -1 }), ErrInvalid, "pid -1"},
		{"EX orphan pid", mutate(func(s *State) {
			s.Orphans[0].Pid, s.Orphans[0].Mode, s.Orphans[0].Resource = 0, ModeEX, "r3"
		}), ErrInvalid, "EX with pid 0"},
		{"registered pid", mutate(func(s *State) { s.Clients[1].Pid = 0 }), ErrInvalid, "want -1"},
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, tc := range rejectCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Decode(tc.blob)
			if s != nil || !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("Decode = %v, %v; want %v containing %q", s, err, tc.want, tc.text)
			}
		})
	}
}

func TestEncodeRejectsInvalid(t *testing.T) {
	s := sampleState()
	s.Lockspaces[0].Name = "bad\xff"
	if _, err := Encode(s); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "UTF-8") {
		t.Fatalf("Encode = %v, want ErrInvalid about UTF-8", err)
	}
	if _, err := Encode(nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Encode(nil) = %v", err)
	}
}

// FuzzDecode: Decode never panics, and what it accepts re-encodes to a
// blob that decodes to the same state.
func FuzzDecode(f *testing.F) {
	good, err := Encode(sampleState())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:headerSize])
	f.Add(seal(1, []byte(`{"NumFDs":1,"PidFile":{"FD":-1}}`)))
	f.Add(seal(1, []byte(`{"NumFDs":3,"PidFile":{"FD":2},"Clients":[{"FD":1,"Pid":-1}]}`)))
	f.Add(seal(2, []byte(`{}`)))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Decode(b)
		if err != nil {
			if s != nil {
				t.Fatal("state returned with an error")
			}
			return
		}
		b2, err := Encode(s)
		if err != nil {
			t.Fatalf("accepted state does not re-encode: %v", err)
		}
		s2, err := Decode(b2)
		if err != nil || !reflect.DeepEqual(s, s2) {
			t.Fatalf("re-encoded state differs: %v", err)
		}
	})
}

// FuzzPayload fuzzes the JSON payload behind a valid header, where the
// strict decoder and Validate do the work.
func FuzzPayload(f *testing.F) {
	good, err := Encode(sampleState())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good[headerSize:])
	f.Add([]byte(`{"NumFDs":1,"PidFile":{"FD":-1}}`))
	f.Add([]byte(`{"NumFDs":3,"PidFile":{"FD":-1},"Clients":[{"FD":1,"Pid":-1},{"FD":2,"Slot":1,"Pid":-1}]}`))
	f.Fuzz(func(t *testing.T, p []byte) {
		s, err := Decode(seal(FormatVersion, p))
		if err != nil {
			if s != nil || !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Decode = %v, %v", s, err)
			}
			return
		}
		if _, err := Encode(s); err != nil {
			t.Fatalf("accepted state does not re-encode: %v", err)
		}
	})
}

// TestWriteSeedCorpus regenerates testdata/fuzz from sampleState and
// rejectCases when HANDOVER_WRITE_CORPUS=1 (after a format change):
//
//	HANDOVER_WRITE_CORPUS=1 go test -run TestWriteSeedCorpus ./handover
func TestWriteSeedCorpus(t *testing.T) {
	if os.Getenv("HANDOVER_WRITE_CORPUS") != "1" {
		t.Skip("set HANDOVER_WRITE_CORPUS=1 to rewrite testdata/fuzz")
	}
	good, err := Encode(sampleState())
	if err != nil {
		t.Fatal(err)
	}
	write := func(fuzz, name string, b []byte) {
		dir := filepath.Join("testdata", "fuzz", fuzz)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		name = strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
				return r
			}
			return '-'
		}, strings.ToLower(name))
		data := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A released format is written once and kept.
	v := filepath.Join("testdata", "formats", fmt.Sprintf("v%d.blob", FormatVersion))
	if _, err := os.Stat(v); os.IsNotExist(err) {
		if err := os.MkdirAll(filepath.Dir(v), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(v, good, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("FuzzDecode", "valid-sample", good)
	write("FuzzPayload", "valid-sample", good[headerSize:])
	for _, tc := range rejectCases(t) {
		if len(tc.blob) > 1<<20 {
			continue
		}
		write("FuzzDecode", "reject-"+tc.name, tc.blob)
		if len(tc.blob) >= headerSize {
			write("FuzzPayload", "reject-"+tc.name, tc.blob[headerSize:])
		}
	}
}

func TestSealHelperMatchesEncode(t *testing.T) {
	good, _ := Encode(sampleState())
	if !bytes.Equal(seal(FormatVersion, good[headerSize:]), good) {
		t.Fatal("seal differs from Encode")
	}
	if sha256.Size != 32 {
		t.Fatal("sha256 size")
	}
}

// TestReleasedFormats: every format version ever written stays readable
// (a newer binary accepts the older format). testdata/formats
// holds one blob per version, written once by TestWriteSeedCorpus from
// sampleState and never rewritten; a change that breaks one of them needs
// a decodePayload case instead (docs/upgrade.md "Versioning").
func TestReleasedFormats(t *testing.T) {
	names, err := filepath.Glob(filepath.Join("testdata", "formats", "v*.blob"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no released formats in testdata/formats: %v", err)
	}
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		s, err := Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s.Lockspaces[0].Generation != 3 || s.Tokens[0].Lver != 7 || s.Clients[0].Name != "holder" ||
			s.Lockspaces[0].Wdmd.Name != "sanlock_ls1:1" || len(s.Orphans) != 1 {
			t.Fatalf("%s: decoded %+v", name, s)
		}
		if strings.HasSuffix(name, "v2.blob") && (s.Lockspaces[0].AcquireLastSuccess != 1100 ||
			len(s.Lockspaces[0].Leader.Raw) != LeaderSize || s.Tokens[0].Hold == nil || s.Tokens[0].Hold.Dblock.Mbal != 2001) {
			t.Fatalf("%s: format 2 fields lost: %+v", name, s.Lockspaces[0])
		}
	}
}

// TestSetConfigFlagsRoundTrip: the SET_CONFIG flags of a lockspace travel
// (added to format 2 without a new version, docs/upgrade.md "Versioning"
// rule 1), and a state without them encodes without the fields, so an
// image of the same format that does not know them still reads it.
func TestSetConfigFlagsRoundTrip(t *testing.T) {
	s := sampleState()
	plain, err := Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ExternalUsed", "UsedByOrphans", "UsedRetries"} {
		if bytes.Contains(plain, []byte(`"`+f+`"`)) {
			t.Fatalf("%s encoded while clear", f)
		}
	}
	s.Lockspaces[0].ExternalUsed, s.Lockspaces[0].UsedByOrphans, s.Lockspaces[0].UsedRetries = true, true, 3
	b, err := Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if l := got.Lockspaces[0]; !l.ExternalUsed || !l.UsedByOrphans || l.UsedRetries != 3 {
		t.Fatalf("flags lost: %+v", l)
	}
}

// TestSHOrphanWithoutPid: an SH orphan has no holder pid (0) and is valid.
func TestSHOrphanWithoutPid(t *testing.T) {
	s := sampleState()
	s.Orphans[0].Pid = 0
	b, err := Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Orphans[0].Pid != 0 || got.Orphans[0].Mode != ModeSH {
		t.Fatalf("orphan %+v", got.Orphans[0])
	}
}

// TestEventListenerFDs: a lockspace's event listeners are fd table
// indexes like any other: they round-trip, are remapped with the table,
// and one used twice (or shared with another fd field) is refused.
func TestEventListenerFDs(t *testing.T) {
	s := sampleState()
	s.NumFDs++
	s.Lockspaces[0].EventListeners = []int{s.NumFDs - 1}
	b, err := Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if l := got.Lockspaces[0].EventListeners; len(l) != 1 || l[0] != s.NumFDs-1 {
		t.Fatalf("listeners %v", l)
	}
	found := false
	for _, r := range got.fdRefs() {
		found = found || r == &got.Lockspaces[0].EventListeners[0]
	}
	if !found {
		t.Fatal("event listener fd not in fdRefs")
	}
	s.Lockspaces[0].EventListeners = []int{0}
	if _, err := Encode(s); err == nil || !strings.Contains(err.Error(), "used twice") {
		t.Fatalf("listener sharing fd 0: %v", err)
	}
}

// Writing format 1 (Spec.WriteFormat, playing the previous release)
// leaves out what format 1 did not have, without touching the state.
func TestWriteFormat1(t *testing.T) {
	s := sampleState()
	s.Lockspaces[0].EventListeners = nil
	s.Lockspaces[0].HostTable = &HostTable{FirstCheck: 1, LastCheck: 2, Hosts: []HostRecord{{HostID: 1, LastLive: 2}}}
	blob, err := encodeVersion(s, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Lockspaces[0].Leader.Raw) == 0 || s.Lockspaces[0].HostTable == nil {
		t.Fatal("the caller's state changed")
	}
	got, err := Decode(blob)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Lockspaces[0].Leader.Raw) != 0 || got.Lockspaces[0].HostTable != nil {
		t.Errorf("format 1 with format-2 fields: %+v", got.Lockspaces[0])
	}
	for _, tk := range got.Tokens {
		if tk.Hold != nil {
			t.Errorf("format 1 with a hold: %+v", tk)
		}
	}
	s.Lockspaces[0].EventListeners = []int{0}
	if _, err := encodeVersion(s, 1); err == nil {
		t.Error("format 1 with event listeners")
	}
}

// A pending request (docs/upgrade.md "Pending requests") round-trips in
// format 2, is bounded, and has no format-1 form.
func TestPendingRequest(t *testing.T) {
	s := sampleState()
	s.Clients[0].Pending = bytes.Repeat([]byte{1}, 64)
	blob, err := Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(blob)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Clients[0].Pending, s.Clients[0].Pending) {
		t.Errorf("pending %x, want %x", got.Clients[0].Pending, s.Clients[0].Pending)
	}
	s.Lockspaces[0].EventListeners = nil
	if _, err := encodeVersion(s, 1); err == nil {
		t.Error("format 1 with a pending request")
	}
	for _, n := range []int{1, 31, MaxPendingLen + 1} {
		s.Clients[0].Pending = make([]byte, n)
		if _, err := Encode(s); err == nil {
			t.Errorf("pending request of %d bytes accepted", n)
		}
	}
}
