package cli

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/diskfmt"
)

const size4K8M = diskfmt.FlagSector4K | diskfmt.FlagAlign8M

func TestNewCmdDirectInit(t *testing.T) {
	// The versions init writes come from sanlock.conf; the tests have none.
	dv, pv := diskfmt.DeltaVersion, diskfmt.PaxosVersion
	testParse(t, NewCmdDirectInit, []parseCase[DirectInitOptions]{
		{name: "none", want: &DirectInitOptions{IOTimeout: 10, LeaseIOTimeout: 10, DeltaVersion: dv, PaxosVersion: pv}},
		{name: "-s", args: []string{"-s", "LS:1:/p:0"},
			want: &DirectInitOptions{IOTimeout: 10, LeaseIOTimeout: 10, DeltaVersion: dv, PaxosVersion: pv, Lockspace: ls("LS:1:/p:0")}},
		{name: "first -r", args: []string{"-r", "LS:R:/p:1M", "-r", "LS:Q:/p:0"},
			want: &DirectInitOptions{IOTimeout: 10, LeaseIOTimeout: 10, DeltaVersion: dv, PaxosVersion: pv, Resource: resp(t, "LS:R:/p:1M")}},
		{name: "-Z -A", args: []string{"-Z", "4096", "-A", "8M"},
			want: &DirectInitOptions{IOTimeout: 10, LeaseIOTimeout: 10, DeltaVersion: dv, PaxosVersion: pv, SizeFlags: size4K8M}},
		{name: "-Z alone", args: []string{"-Z", "4096"},
			want: &DirectInitOptions{IOTimeout: 10, LeaseIOTimeout: 10, DeltaVersion: dv, PaxosVersion: pv, SizeFlags: diskfmt.FlagSector4K}},
		{name: "-n", args: []string{"-n", "-3"}, want: &DirectInitOptions{IOTimeout: 10, LeaseIOTimeout: 10, DeltaVersion: dv, PaxosVersion: pv, NumHosts: -3}},
		{name: "-z", args: []string{"-z", "1"}, want: &DirectInitOptions{IOTimeout: 10, LeaseIOTimeout: 10, DeltaVersion: dv, PaxosVersion: pv, Clear: true}},
		{name: "-o", args: []string{"-o", "3"}, want: &DirectInitOptions{IOTimeout: 3, LeaseIOTimeout: 3, DeltaVersion: dv, PaxosVersion: pv}},
		{name: "negative -o is recorded", args: []string{"-o", "-5"}, want: &DirectInitOptions{IOTimeout: 10, LeaseIOTimeout: 65531, DeltaVersion: dv, PaxosVersion: pv}},
		{name: "-a is read, unused", args: []string{"-a", "0"}, want: &DirectInitOptions{IOTimeout: 10, LeaseIOTimeout: 10, DeltaVersion: dv, PaxosVersion: pv}},
		badLetter[DirectInitOptions](),
	})
}

func TestNewCmdDirectReadLeader(t *testing.T) {
	testParse(t, NewCmdDirectReadLeader, []parseCase[DirectReadLeaderOptions]{
		{name: "-s", args: []string{"-s", "LS:1:/p:0"}, want: &DirectReadLeaderOptions{IOTimeout: 10, Lockspace: ls("LS:1:/p:0")}},
		{name: "-r", args: []string{"-r", "LS:R:/p:0"}, want: &DirectReadLeaderOptions{IOTimeout: 10, Resource: resp(t, "LS:R:/p:0")}},
		{name: "-Z -A", args: []string{"-Z", "4096", "-A", "8M"}, want: &DirectReadLeaderOptions{IOTimeout: 10, SizeFlags: size4K8M}},
		{name: "-o", args: []string{"-o", "1"}, want: &DirectReadLeaderOptions{IOTimeout: 1}},
		badLetter[DirectReadLeaderOptions](),
	})
}

func TestNewCmdDirectDump(t *testing.T) {
	testParse(t, NewCmdDirectDump, []parseCase[DirectDumpOptions]{
		{name: "path", args: []string{"/dev/x:1M"}, want: &DirectDumpOptions{IOTimeout: 10, Path: "/dev/x:1M"}},
		{name: "-f", args: []string{"/p", "-f", "2"}, want: &DirectDumpOptions{IOTimeout: 10, Path: "/p", Force: 2}},
		{name: "-Z -A", args: []string{"/p", "-Z", "4096", "-A", "8M"}, want: &DirectDumpOptions{IOTimeout: 10, Path: "/p", SizeFlags: size4K8M}},
		{name: "-o", args: []string{"/p", "-o", "2"}, want: &DirectDumpOptions{IOTimeout: 2, Path: "/p"}},
		{name: "the path is first", args: []string{"-f", "1"}, out: "unknown option 1\nspace required before option value\n"},
		{name: "no path", args: nil, out: ""},
		{name: "unknown letter", args: []string{"/p", "-y", "1"}, out: "unknown option: y\n"},
	})
}

func TestNewCmdDirectNextFree(t *testing.T) {
	testParse(t, NewCmdDirectNextFree, []parseCase[DirectNextFreeOptions]{
		{name: "path", args: []string{"/p:2M"}, want: &DirectNextFreeOptions{IOTimeout: 10, Path: "/p:2M"}},
		{name: "-Z -A", args: []string{"/p", "-Z", "512", "-A", "1M"},
			want: &DirectNextFreeOptions{IOTimeout: 10, Path: "/p", SizeFlags: diskfmt.FlagSector512 | diskfmt.FlagAlign1M}},
		{name: "unknown letter", args: []string{"/p", "-y", "1"}, out: "unknown option: y\n"},
	})
}

func TestNewCmdDirectRindex(t *testing.T) {
	rx := *client.ParseRIndex("LS:/p:1M")
	t.Run("format", func(t *testing.T) {
		testParse(t, NewCmdDirectFormat, []parseCase[DirectFormatOptions]{
			{name: "-x", args: []string{"-x", "LS:/p:1M"}, want: &DirectFormatOptions{IOTimeout: 10, RIndex: rx}},
			{name: "-Z -A", args: []string{"-Z", "4096", "-A", "8M"}, want: &DirectFormatOptions{IOTimeout: 10, SizeFlags: size4K8M}},
			badLetter[DirectFormatOptions](),
		})
	})
	t.Run("lookup", func(t *testing.T) {
		testParse(t, NewCmdDirectLookup, []parseCase[DirectLookupOptions]{
			{name: "-x", args: []string{"-x", "LS:/p:1M"}, want: &DirectLookupOptions{IOTimeout: 10, RIndex: rx}},
			{name: "-e", args: []string{"-e", "R:2M"}, want: &DirectLookupOptions{IOTimeout: 10, Entry: rentryArg{Name: "R", Offset: 2 << 20}}},
			badLetter[DirectLookupOptions](),
		})
	})
	t.Run("update", func(t *testing.T) {
		testParse(t, NewCmdDirectUpdate, []parseCase[DirectUpdateOptions]{
			{name: "-x", args: []string{"-x", "LS:/p:1M"}, want: &DirectUpdateOptions{IOTimeout: 10, RIndex: rx}},
			{name: "-e", args: []string{"-e", "R"}, want: &DirectUpdateOptions{IOTimeout: 10, Entry: rentryArg{Name: "R"}}},
			{name: "-z", args: []string{"-z", "0"}, want: &DirectUpdateOptions{IOTimeout: 10, Remove: true}},
			badLetter[DirectUpdateOptions](),
		})
	})
	t.Run("rebuild", func(t *testing.T) {
		testParse(t, NewCmdDirectRebuild, []parseCase[DirectRebuildOptions]{
			{name: "-x", args: []string{"-x", "LS:/p:1M"}, want: &DirectRebuildOptions{IOTimeout: 10, RIndex: rx}},
			badLetter[DirectRebuildOptions](),
		})
	})
}

func TestNewCmdDirectWriteLeader(t *testing.T) {
	testParse(t, NewCmdDirectWriteLeader, []parseCase[DirectWriteLeaderOptions]{
		{name: "-s", args: []string{"-s", "LS:1:/p:0"}, want: &DirectWriteLeaderOptions{IOTimeout: 10, Lockspace: ls("LS:1:/p:0")}},
		{name: "-r", args: []string{"-r", "LS:R:/p:0"}, want: &DirectWriteLeaderOptions{IOTimeout: 10, Resource: resp(t, "LS:R:/p:0")}},
		{name: "-F", args: []string{"-F", "/tmp/l"}, want: &DirectWriteLeaderOptions{IOTimeout: 10, File: "/tmp/l"}},
		{name: "-f", args: []string{"-f", "1"}, want: &DirectWriteLeaderOptions{IOTimeout: 10, Force: 1}},
		{name: "-Z -A", args: []string{"-Z", "4096", "-A", "8M"}, want: &DirectWriteLeaderOptions{IOTimeout: 10, SizeFlags: size4K8M}},
		badLetter[DirectWriteLeaderOptions](),
	})
}

func TestNewCmdDirectAcquire(t *testing.T) {
	testParse(t, NewCmdDirectAcquire, []parseCase[DirectAcquireOptions]{
		{name: "-r", args: []string{"-r", "LS:R:/p:0"},
			want: &DirectAcquireOptions{IOTimeout: 10, WatchdogFireTimeout: 60, Resource: resp(t, "LS:R:/p:0")}},
		{name: "-i", args: []string{"-i", "3"}, want: &DirectAcquireOptions{IOTimeout: 10, WatchdogFireTimeout: 60, HostID: 3}},
		{name: "-g", args: []string{"-g", "0x10"}, want: &DirectAcquireOptions{IOTimeout: 10, WatchdogFireTimeout: 60, Generation: 16}},
		{name: "-Z -A", args: []string{"-Z", "4096", "-A", "8M"},
			want: &DirectAcquireOptions{IOTimeout: 10, WatchdogFireTimeout: 60, SizeFlags: size4K8M}},
		badLetter[DirectAcquireOptions](),
	})
}

func TestNewCmdDirectRelease(t *testing.T) {
	testParse(t, NewCmdDirectRelease, []parseCase[DirectReleaseOptions]{
		{name: "-r", args: []string{"-r", "LS:R:/p:0"}, want: &DirectReleaseOptions{IOTimeout: 10, Resource: resp(t, "LS:R:/p:0")}},
		{name: "-i and -g are not used", args: []string{"-i", "3", "-g", "2"}, want: &DirectReleaseOptions{IOTimeout: 10}},
		badLetter[DirectReleaseOptions](),
	})
}

func TestNewCmdDirectDeltaActions(t *testing.T) {
	base := DeltaOptions{IOTimeout: 10, WatchdogFireTimeout: 60}
	with := func(f func(*DeltaOptions)) DeltaOptions { o := base; f(&o); return o }
	lsOpt := with(func(o *DeltaOptions) { o.Lockspace = ls("LS:2:/p:0") })
	sizes := with(func(o *DeltaOptions) { o.SizeFlags = size4K8M })
	t.Run("acquire_id", func(t *testing.T) {
		long := "h0123456789012345678901234567890123456789012345678901234"
		testParse(t, NewCmdDirectAcquireID, []parseCase[DirectAcquireIDOptions]{
			{name: "-s", args: []string{"-s", "LS:2:/p:0"}, want: &DirectAcquireIDOptions{DeltaOptions: lsOpt}},
			{name: "-e", args: []string{"-e", "host1"}, want: &DirectAcquireIDOptions{DeltaOptions: base, HostName: "host1"}},
			{name: "-e is cut", args: []string{"-e", long}, want: &DirectAcquireIDOptions{DeltaOptions: base, HostName: long[:48]}},
			{name: "-Z -A", args: []string{"-Z", "4096", "-A", "8M"}, want: &DirectAcquireIDOptions{DeltaOptions: sizes}},
			badLetter[DirectAcquireIDOptions](),
		})
	})
	t.Run("release_id", func(t *testing.T) {
		testParse(t, NewCmdDirectReleaseID, []parseCase[DirectReleaseIDOptions]{
			{name: "-s", args: []string{"-s", "LS:2:/p:0"}, want: &DirectReleaseIDOptions{lsOpt}},
			{name: "-Z -A", args: []string{"-Z", "4096", "-A", "8M"}, want: &DirectReleaseIDOptions{sizes}},
			badLetter[DirectReleaseIDOptions](),
		})
	})
	t.Run("renew_id", func(t *testing.T) {
		testParse(t, NewCmdDirectRenewID, []parseCase[DirectRenewIDOptions]{
			{name: "-s", args: []string{"-s", "LS:2:/p:0"}, want: &DirectRenewIDOptions{lsOpt}},
			{name: "-o", args: []string{"-o", "4"}, want: &DirectRenewIDOptions{with(func(o *DeltaOptions) { o.IOTimeout = 4 })}},
			badLetter[DirectRenewIDOptions](),
		})
	})
}

// TestEveryDirectActionHasACommand: one command per action of the table.
func TestEveryDirectActionHasACommand(t *testing.T) {
	f := testFactory(&bytes.Buffer{}, &bytes.Buffer{})
	for _, a := range directActionList {
		assert.Equal(t, a.name(), newDirectActionCmd(f, a.name()).Name())
	}
}
