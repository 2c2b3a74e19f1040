package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/testdisk"
)

// The differential tests against the real binary are in
// cmd/sanlock/interop_direct_lease_test.go. These cover what they cannot:
// waits of minutes (on synctest's fake clock) and our deliberate
// differences.

// memDisk is an in-memory disk that survives the tool's Close.
type memDisk struct{ *testdisk.Mem }

func (memDisk) Close() error { return nil }

// withMem makes the path "mem" open m (other paths do not exist).
func withMem(m *testdisk.Mem) func(*Factory) {
	return func(f *Factory) {
		f.OpenDevice = func(path string) (diskfmt.Device, error) {
			if path != "mem" {
				return nil, syscall.ENOENT
			}
			return memDisk{m}, nil
		}
	}
}

// memLockspace: lockspace LS (io_timeout 1) at 0, resource R at 1 MiB.
func memLockspace(t *testing.T) *testdisk.Mem {
	m := testdisk.NewMem(2<<20, 512)
	ctx := context.Background()
	flags := uint32(diskfmt.FlagSector512 | diskfmt.FlagAlign1M)
	if err := diskfmt.WriteLockspace(ctx, m, 0, flags, "LS", 1, 0); err != nil {
		t.Fatal(err)
	}
	if err := diskfmt.WriteResource(ctx, []diskfmt.ResourceDisk{{Dev: m, Offset: 1 << 20}}, flags,
		diskfmt.PaxosInit{SpaceName: "LS", ResourceName: "R"}); err != nil {
		t.Fatal(err)
	}
	return m
}

func memLeader(t *testing.T, m *testdisk.Mem, off int64) diskfmt.Leader {
	l, err := diskfmt.DecodeLeader(m.Bytes()[off:])
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// setOwner writes host_id 1's delta lease as held by host name "other".
func setOwner(t *testing.T, m *testdisk.Mem, ts uint64) {
	l := memLeader(t, m, 0)
	l.OwnerID, l.OwnerGeneration, l.Timestamp = 1, 1, ts
	l.ResourceName = diskfmt.MustName("other")
	b := make([]byte, 512)
	l.Seal(b)
	if err := m.WriteAt(context.Background(), b, 0); err != nil {
		t.Fatal(err)
	}
}

// TestDirectAcquireIDTakeover: a lease held by another host name that is
// not renewed is taken after max(8N+W, 8N) seconds, plus the 2N delay.
func TestDirectAcquireIDTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := memLockspace(t)
		setOwner(t, m, 100)
		mem := withMem(m)
		start := time.Now()
		out, rc := runMainF(t, mem, "direct", "acquire_id", "-s", "LS:1:mem:0", "-o", "1", "-e", "me")
		if out != "acquire_id done 0\n" || rc != 0 {
			t.Fatalf("got %q rc %d", out, rc)
		}
		if d := time.Since(start); d < 70*time.Second || d > 72*time.Second {
			t.Errorf("took %v, want 8+60+2 s", d)
		}
		l := memLeader(t, m, 0)
		if l.OwnerGeneration != 2 || diskfmt.NameString(l.ResourceName[:]) != "me" || l.Timestamp == 0 {
			t.Errorf("lease after takeover: %+v", l)
		}
	})
}

// TestDirectAcquireIDBusy: the owner renews while we watch: -262.
func TestDirectAcquireIDBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := memLockspace(t)
		setOwner(t, m, 100)
		mem := withMem(m)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			for ts := uint64(101); ; ts++ {
				select {
				case <-ctx.Done():
					return
				case <-time.After(2 * time.Second):
					setOwner(t, m, ts)
				}
			}
		}()
		out, rc := runMainF(t, mem, "direct", "acquire_id", "-s", "LS:1:mem:0", "-o", "1", "-e", "me")
		if out != "acquire_id done -262\n" || rc != 1 {
			t.Fatalf("got %q rc %d", out, rc)
		}
		cancel()
	})
}

// TestDirectAcquireSharedHolder: unlike sanlock, which takes the lease
// exclusively over another host's shared hold, we cannot tell that holder
// is dead and fail with -EAGAIN, leaving the lease free.
func TestDirectAcquireSharedHolder(t *testing.T) {
	m := memLockspace(t)
	mem := withMem(m)
	sec := make([]byte, 512)
	mb := diskfmt.ModeBlock{Flags: diskfmt.ModeShared, Generation: 1}
	mb.Encode(sec[diskfmt.ModeBlockOffset:])
	m.Load(sec, 1<<20+diskfmt.DblockSector(2)*512)
	out, rc := runMainF(t, mem, "direct", "acquire", "-r", "LS:R:mem:1048576", "-i", "1", "-g", "1")
	if out != "acquire done -11\n" || rc != 1 {
		t.Fatalf("got %q rc %d", out, rc)
	}
	if l := memLeader(t, m, 1<<20); l.Timestamp != 0 || l.Lver != 1 {
		t.Errorf("leader after the refused acquire: %+v", l)
	}
}

// TestDirectRefusals: inputs on which sanlock crashes or writes where it
// should not; we fail and write nothing.
func TestDirectRefusals(t *testing.T) {
	m := memLockspace(t)
	mem := withMem(m)
	// host_id 2's slot holds host_id 1's record
	l := memLeader(t, m, 0)
	l.OwnerID, l.OwnerGeneration, l.Timestamp = 1, 1, 7
	b := make([]byte, 512)
	l.Seal(b)
	m.Load(b, 512)
	before := bytes.Clone(m.Bytes())
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"acquire", "-i", "1", "-g", "1"}, "acquire done -22\n"},
		{[]string{"release"}, "release done -22\n"},
		{[]string{"acquire", "-r", "LS", "-i", "1"}, "resource arg parse error -6\n\nacquire done -22\n"},
		{[]string{"acquire", "-r", "LS:R:mem:1048576", "-i", "0", "-g", "0"}, "acquire done -22\n"},
		{[]string{"release_id", "-s", "LS:2:mem:0"}, "release_id done -22\n"},
	} {
		out, rc := runMainF(t, mem, append([]string{"direct"}, c.args...)...)
		if out != c.want || rc != 1 {
			t.Errorf("%v: got %q rc %d, want %q", c.args, out, rc, c.want)
		}
	}
	if !bytes.Equal(before, m.Bytes()) {
		t.Error("the disk changed")
	}
}

// TestDirectWriteLeaderDeltaChecksum: unlike sanlock (uninitialised
// memory), the delta leader is written with the checksum printed: the
// generated one, or with -f the one the file gives.
func TestDirectWriteLeaderDeltaChecksum(t *testing.T) {
	m := memLockspace(t)
	mem := withMem(m)
	in := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(in, []byte("owner_id 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, rc := runMainF(t, mem, "direct", "write_leader", "-s", "LS:2:mem:0", "-F", in)
	if rc != 0 || !strings.Contains(out, "write_leader done 0\n") {
		t.Fatalf("got %q rc %d", out, rc)
	}
	if _, err := diskfmt.VerifyDelta(m.Bytes()[512:], "LS"); err != nil {
		t.Errorf("written lease does not verify: %v", err)
	}
	if err := os.WriteFile(in, []byte("checksum 0x1234\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, rc = runMainF(t, mem, "direct", "write_leader", "-s", "LS:2:mem:0", "-F", in, "-f", "1")
	if rc != 0 || !strings.HasPrefix(out, "warning: using specified checksum 1234 (generated is ") {
		t.Fatalf("got %q rc %d", out, rc)
	}
	if l := memLeader(t, m, 512); l.Checksum != 0x1234 {
		t.Errorf("checksum written %#x, want 0x1234", l.Checksum)
	}
}

// TestLeaderFileParsing: the -F file rules (pieces of 127 bytes, scanf
// numbers, "0x" hex, names cut to 48 bytes).
func TestLeaderFileParsing(t *testing.T) {
	var l diskfmt.Leader
	l.Flags, l.OwnerID = 0x10, 5
	in := strings.Join([]string{
		"owner_id abc", "lver -1", "timestamp 12abc", "flags 20", "magic 0x0x12", "version 0x-1",
		"io_timeout 70000", "space_name " + strings.Repeat("S", 60), "write_id 9", "extra1 4",
		strings.Repeat("x", 130) + " 1", "one", "",
	}, "\n")
	var out bytes.Buffer
	applyLeaderFile(&out, strings.NewReader(in), &l, true)
	want := `ignore field: "write_id"
ignore line: "` + strings.Repeat("x", 127) + `"
ignore field: "xxx"
ignore line: "one
"
`
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
	if l.OwnerID != 5 || l.Lver != ^uint64(0) || l.Timestamp != 12 || l.Flags != 0x10 || l.Magic != 0x12 ||
		l.Version != 0xffffffff || l.IOTimeout != 70000&0xffff || l.WriteID != 4 ||
		diskfmt.NameString(l.SpaceName[:]) != strings.Repeat("S", 48) {
		t.Errorf("leader: %+v", l)
	}
}
