package client

import (
	"reflect"
	"strings"
	"testing"
)

// The argument-string cases of the sanlock 3.8.5 tool (docs/cli.md "Argument strings"), checked
// against the binary when the CLI was written.

// resArg is the view of a parsed RESOURCE the cases below compare.
type resArg struct {
	Lockspace string
	Name      string
	Disks     []Disk
	Lver      uint64
	HasLver   bool
	Shared    bool
}

func toResArg(r *Resource) resArg {
	return resArg{Lockspace: r.LockspaceName, Name: r.Name, Disks: r.Disks, Lver: r.LVer,
		HasLver: r.Flags&ResLVer != 0, Shared: r.Flags&ResShared != 0}
}

func TestParseLockspaceCLI(t *testing.T) {
	n48 := strings.Repeat("a", 48)
	lsa := func(name string, id uint64, path string, off uint64) Lockspace {
		return Lockspace{Name: name, HostID: id, Disk: Disk{Path: path, Offset: off}}
	}
	for _, c := range []struct {
		in   string
		want Lockspace
	}{
		{"LS:1:/p:0", lsa("LS", 1, "/p", 0)},
		{"LS:1:/p:1M", lsa("LS", 1, "/p", 1<<20)},
		{"LS:1:/p:2Mjunk", lsa("LS", 1, "/p", 2<<20)},
		{"LS:1:/p:0:junk", lsa("LS", 1, "/p", 0)},
		{"LS:1:/p", lsa("LS", 1, "/p", 0)},
		{"LS", Lockspace{Name: "LS"}},
		{"LS:0", Lockspace{Name: "LS"}},
		{`LS:2:/a\:b c:1048576`, lsa("LS", 2, "/a:b c", 1<<20)},
		// The M rewrite finds colons without looking at escapes, so the
		// escaped colon counts: "b c:1" is read as the MiB count (0) and
		// the path becomes "/a:0" with offset "1M" = 1 (sanlock then fails
		// with -19 on the missing path).
		{`LS:2:/a\:b c:1M`, lsa("LS", 2, "/a:0", 1)},
		{n48 + "b:1:/p:0", lsa(n48, 1, "/p", 0)},
		{"LS:x:/p:7", lsa("LS", 0, "/p", 7)},
	} {
		if got := ParseLockspace(c.in); *got != c.want {
			t.Errorf("ParseLockspace(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

func TestParseResourceCLI(t *testing.T) {
	n48 := strings.Repeat("a", 48)
	d := func(p string, o uint64) Disk { return Disk{Path: p, Offset: o} }
	for _, c := range []struct {
		in   string
		want resArg
		rv   int
	}{
		{"LS:R:/p:0", resArg{Lockspace: "LS", Name: "R", Disks: []Disk{d("/p", 0)}}, 0},
		{"LS:R:/p:1M", resArg{Lockspace: "LS", Name: "R", Disks: []Disk{d("/p", 1<<20)}}, 0},
		{"LS:R:/p:1M:5", resArg{Lockspace: "LS", Name: "R", Disks: []Disk{d("/p", 1<<20)}, Lver: 5, HasLver: true}, 0},
		{"LS:R:/p:1M:0x10", resArg{Lockspace: "LS", Name: "R", Disks: []Disk{d("/p", 1<<20)}, Lver: 16, HasLver: true}, 0},
		{"LS:R:/p:1M:SH", resArg{Lockspace: "LS", Name: "R", Disks: []Disk{d("/p", 1<<20)}, Shared: true}, 0},
		{"LS:R:/p:1M:/p", resArg{Lockspace: "LS", Name: "R", Disks: []Disk{d("/p", 1<<20)}, HasLver: true}, 0},
		// Only the first offset takes the M shorthand; "2M" later reads as 2.
		{"LS:R:/p:1M:/q:2M", resArg{Lockspace: "LS", Name: "R", Disks: []Disk{d("/p", 1<<20), d("/q", 2)}}, 0},
		// The M search spans later fields; the text from the 4th colon stays.
		{"LS:R:/p:2:5M", resArg{Lockspace: "LS", Name: "R", Disks: []Disk{d("/p", 2<<20)}, Lver: 5, HasLver: true}, 0},
		{"LS:R:/p:2Mxyz:7", resArg{Lockspace: "LS", Name: "R", Disks: []Disk{d("/p", 2<<20)}, Lver: 7, HasLver: true}, 0},
		{"LS:R:/p:2:/p:M", resArg{}, -1},
		{`LS:R:/a\:b\ c:0`, resArg{Lockspace: "LS", Name: "R", Disks: []Disk{d("/a:b c", 0)}}, 0},
		{"LS:R1", resArg{Lockspace: "LS", Name: "R1"}, 0},
		{"LS:", resArg{Lockspace: "LS"}, 0},
		{"LS:" + n48 + ":/p:0", resArg{Lockspace: "LS", Name: n48, Disks: []Disk{d("/p", 0)}}, 0},
		{"LS:" + n48 + "b:/p:0", resArg{}, -1},
		{n48 + "b:R:/p:0", resArg{}, -1},
		{"ab", resArg{}, -6},
		{":", resArg{}, -6},
		{"::", resArg{}, -6},
		{"LS", resArg{}, -6},
		{"LSX", resArg{}, -1},
		{"LS:R:/p", resArg{}, -1},
		{"LS:R:/p:xx", resArg{}, -1},
		{"LS:R::0", resArg{}, -1},
		{`LS:R:/p:5\`, resArg{}, -1},
		{"LS:R:/a:1:/b:2:/c:3:/d:4", resArg{Lockspace: "LS", Name: "R",
			Disks: []Disk{d("/a", 1), d("/b", 2), d("/c", 3), d("/d", 4)}}, 0},
		{"LS:R:/a:1:/b:2:/c:3:/d:4:SH", resArg{Lockspace: "LS", Name: "R",
			Disks: []Disk{d("/a", 1), d("/b", 2), d("/c", 3), d("/d", 4)}, Shared: true}, 0},
		{"LS:R:/a:1:/b:2:/c:3:/d:4:/e:5", resArg{}, -2},
		{"LS:R:/p:" + strings.Repeat("1", 16) + "M", resArg{Lockspace: "LS", Name: "R",
			Disks: []Disk{d("/p", wrapMiB(111111111111111))}}, 0},
	} {
		r, err := ParseResource(c.in)
		rv := ErrorCode(err)
		if rv != c.rv || (rv == 0 && !reflect.DeepEqual(toResArg(r), c.want)) {
			t.Errorf("ParseResource(%q) = %+v, %d; want %+v, %d", c.in, r, rv, c.want, c.rv)
		}
	}
}

// wrapMiB multiplies like C unsigned arithmetic (mod 2^64).
func wrapMiB(n uint64) uint64 { return n * (1 << 20) }

func TestParseRIndexCLI(t *testing.T) {
	if got := ParseRIndex(`LS:/a\:b:4M`); *got != (RIndex{LockspaceName: "LS", Disk: Disk{Path: "/a:b", Offset: 4 << 20}}) {
		t.Errorf("ParseRIndex = %+v", got)
	}
	if got := ParseRIndex("LS:/p:4194304"); *got != (RIndex{LockspaceName: "LS", Disk: Disk{Path: "/p", Offset: 4 << 20}}) {
		t.Errorf("ParseRIndex = %+v", got)
	}
	if got := ParseRIndex("LS"); *got != (RIndex{LockspaceName: "LS"}) {
		t.Errorf("ParseRIndex = %+v", got)
	}
}

func TestResourceStringCLI(t *testing.T) {
	r := Resource{LockspaceName: "LS", Name: "R", Disks: []Disk{{Path: "/a:b c", Offset: 1 << 20}}, LVer: 3}
	if got := ResourceString(&r); got != `LS:R:/a\:b\ c:1048576:3` {
		t.Errorf("got %q", got)
	}
	r.Flags |= ResShared
	if got := ResourceString(&r); got != `LS:R:/a\:b\ c:1048576:SH` {
		t.Errorf("got %q", got)
	}
}
