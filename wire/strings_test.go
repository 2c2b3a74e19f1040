package wire

import (
	"reflect"
	"testing"

	"github.com/gosanlock/gosanlock/rescode"
)

func TestResourceString(t *testing.T) {
	for _, tc := range []struct {
		r    Resource
		want string
	}{
		{Resource{LockspaceName: "LS", Name: "R1", LVer: 2, Disks: []Disk{{Path: "/mnt/shared0/leases", Offset: 1048576}}},
			"LS:R1:/mnt/shared0/leases:1048576:2"},
		{Resource{LockspaceName: "LS", Name: "R2", Flags: ResShared, Disks: []Disk{{Path: "/a:b c", Offset: 0}, {Path: "/d", Offset: 5}}},
			`LS:R2:/a\:b\ c:0:/d:5:SH`},
		{Resource{LockspaceName: "LS", Name: "R3"}, "LS:R3:0"},
	} {
		if got := ResourceString(&tc.r); got != tc.want {
			t.Errorf("got %q want %q", got, tc.want)
		}
	}
}

func TestParseResource(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want *Resource
		code int
	}{
		{"LS:R1:/mnt/shared0/leases:1048576", &Resource{LockspaceName: "LS", Name: "R1", NumDisks: 1,
			Disks: []Disk{{Path: "/mnt/shared0/leases", Offset: 1048576}}}, 0},
		{"LS:R1:/p:1M", &Resource{LockspaceName: "LS", Name: "R1", NumDisks: 1, Disks: []Disk{{Path: "/p", Offset: mib}}}, 0},
		{"LS:R1:/p:2M:7", &Resource{LockspaceName: "LS", Name: "R1", NumDisks: 1, Flags: ResLVer, LVer: 7,
			Disks: []Disk{{Path: "/p", Offset: 2 * mib}}}, 0},
		{"LS:R1:/p:0:SH", &Resource{LockspaceName: "LS", Name: "R1", NumDisks: 1, Flags: ResShared,
			Disks: []Disk{{Path: "/p", Offset: 0}}}, 0},
		{"LS:R1:/p:0:0x10", &Resource{LockspaceName: "LS", Name: "R1", NumDisks: 1, Flags: ResLVer, LVer: 16,
			Disks: []Disk{{Path: "/p", Offset: 0}}}, 0},
		{`LS:R1:/a\:b\ c:0:/d:4096`, &Resource{LockspaceName: "LS", Name: "R1", NumDisks: 2,
			Disks: []Disk{{Path: "/a:b c", Offset: 0}, {Path: "/d", Offset: 4096}}}, 0},
		{"LS:R1", &Resource{LockspaceName: "LS", Name: "R1"}, 0},
		{"::/p:5", &Resource{NumDisks: 1, Disks: []Disk{{Path: "/p", Offset: 5}}}, 0},
		{"ab", nil, -6},
		{"LSX", nil, -1},
		{"LS:R1:/p", nil, -1},
		{"a:b:c:1:d:2:e:3:f:4:g:5", nil, -2},
		{"LS:R1:/p:x", nil, -1},
		{"LS:R1::0", nil, -1},
		{`LS:R1:/p:0\`, nil, -1},
	} {
		got, err := ParseResource(tc.in)
		if tc.code != 0 {
			if rescode.ErrorCode(err) != tc.code {
				t.Errorf("%q: err %v, want %d", tc.in, err, tc.code)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: got %+v %v want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestStateRoundTrip(t *testing.T) {
	res := []Resource{
		{LockspaceName: "LS", Name: "R1", LVer: 1, Flags: ResLVer, NumDisks: 1, Disks: []Disk{{Path: "/mnt/x", Offset: mib}}},
		{LockspaceName: "LS", Name: "R2", Flags: ResShared, NumDisks: 2, Disks: []Disk{{Path: "/a:b", Offset: 0}, {Path: "/c", Offset: 1}}},
	}
	s, err := FormatState(res)
	if err != nil || s != `LS:R1:/mnt/x:1048576:1 LS:R2:/a\:b:0:/c:1:SH` {
		t.Fatalf("%q %v", s, err)
	}
	back, err := ParseState(s)
	if err != nil || !reflect.DeepEqual(back, res) {
		t.Fatalf("got %+v %v", back, err)
	}
	// A path with a space makes the daemon fail with -81.
	if _, err := FormatState([]Resource{{LockspaceName: "LS", Name: "R", Disks: []Disk{{Path: "/a b"}}}}); rescode.ErrorCode(err) != rescode.RvELIBSCN {
		t.Errorf("space: %v", err)
	}
	// An unescaped space before the third colon belongs to the entry.
	got, err := ParseState("L S:R:/p:0:1 LS:R2:/q:0:2")
	if err != nil || len(got) != 2 || got[0].LockspaceName != "L S" || got[1].Name != "R2" {
		t.Errorf("%+v %v", got, err)
	}
	if got, err := ParseState(""); err != nil || got != nil {
		t.Errorf("empty: %v", err)
	}
}

func TestParseLockspace(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Lockspace
	}{
		{"LS:1:/mnt/shared0/leases:0", Lockspace{Name: "LS", HostID: 1, Disk: Disk{Path: "/mnt/shared0/leases"}}},
		{"LS:2:/p:1M", Lockspace{Name: "LS", HostID: 2, Disk: Disk{Path: "/p", Offset: mib}}},
		{`LS:0:/a\:b\ c:4096`, Lockspace{Name: "LS", Disk: Disk{Path: "/a:b c", Offset: 4096}}},
		{"LS", Lockspace{Name: "LS"}},
		{`L\S:3`, Lockspace{Name: `L\S`, HostID: 3}},
	} {
		if got := ParseLockspace(tc.in); *got != tc.want {
			t.Errorf("%q: %+v", tc.in, got)
		}
	}
	ls := Lockspace{Name: "LS", HostID: 1, Disk: Disk{Path: "/a:b", Offset: 5}}
	if s := LockspaceString(&ls); s != `LS:1:/a\:b:5` {
		t.Errorf("%q", s)
	}
	if back := ParseLockspace(LockspaceString(&ls)); *back != ls {
		t.Errorf("round trip %+v", back)
	}
	ri := ParseRIndex("LS:/dev/x:2M")
	if ri.LockspaceName != "LS" || ri.Disk.Path != "/dev/x" || ri.Disk.Offset != 2*mib {
		t.Errorf("rindex %+v", ri)
	}
}
