package cli

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/diskfmt"
)

// parseCase is one row of a command's parsing table: the arguments after
// the action word and the options its runF must receive (nil: an option
// error, exit 1, runF not called), with what scanning printed.
type parseCase[O any] struct {
	name string
	args []string
	want *O
	out  string
}

// testParse runs each row through the command newCmd builds with a runF
// that keeps the options (parsing alone: nothing runs). The fields that
// come from the Factory (IO and funcs) are not compared.
func testParse[O any](t *testing.T, newCmd func(*Factory, func(*O) error) *cobra.Command, cases []parseCase[O]) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			f := testFactory(&out, &errb)
			var got *O
			cmd := newCmd(f, func(o *O) error { got = o; return nil })
			cmd.SetArgs(append([]string{}, c.args...)) // not nil: cobra would read os.Args
			err := cmd.Execute()
			f.Out.Flush()
			assert.Equal(t, c.out, out.String(), "what scanning printed")
			if c.want == nil {
				assert.Equal(t, exitError(1), err)
				assert.Nil(t, got, "runF called after an option error")
				return
			}
			require.NoError(t, err)
			require.NotNil(t, got)
			clearFactoryFields(t, reflect.ValueOf(got).Elem())
			assert.Equal(t, c.want, got)
		})
	}
}

// clearFactoryFields zeroes the fields of v that come from the Factory
// (IO and funcs), in embedded structs too, after checking they are set.
func clearFactoryFields(t *testing.T, v reflect.Value) {
	for i := 0; i < v.NumField(); i++ {
		fv, ft := v.Field(i), v.Type().Field(i)
		switch {
		case ft.Anonymous && fv.Kind() == reflect.Struct:
			clearFactoryFields(t, fv)
		case ft.Name == "IO" || fv.Kind() == reflect.Func:
			require.False(t, fv.IsNil(), "%s not set from the Factory", ft.Name)
			fv.SetZero()
		}
	}
}

// badLetter is the row every command has: a letter no mode knows.
func badLetter[O any]() parseCase[O] {
	return parseCase[O]{name: "unknown letter", args: []string{"-y", "1"}, out: "unknown option: y\n"}
}

func ls(s string) client.Lockspace { return *client.ParseLockspace(s) }

func res(t *testing.T, s string) client.Resource {
	r, err := client.ParseResource(s)
	require.NoError(t, err)
	return *r
}

func resp(t *testing.T, s string) *client.Resource { r := res(t, s); return &r }

func TestNewCmdStatus(t *testing.T) {
	testParse(t, NewCmdStatus, []parseCase[StatusOptions]{
		{name: "none", want: &StatusOptions{}},
		{name: "-D", args: []string{"-D"}, want: &StatusOptions{Debug: true}},
		{name: "-o is the sort", args: []string{"-o", "s"}, want: &StatusOptions{Sort: 's'}},
		{name: "--json", args: []string{"--json", "-o", "p"}, want: &StatusOptions{Sort: 'p', JSON: true}},
		{name: "a letter status ignores", args: []string{"-r", "LS:R"}, want: &StatusOptions{}},
		{name: "glued value", args: []string{"-Dx"}, out: "unknown option -Dx\nspace required before option value\n"},
		badLetter[StatusOptions](),
	})
}

func TestNewCmdGets(t *testing.T) {
	testParse(t, NewCmdGets, []parseCase[GetsOptions]{
		{name: "none", want: &GetsOptions{}},
		{name: "-h is hosts", args: []string{"-h", "1"}, want: &GetsOptions{Hosts: true}},
		{name: "-h 0", args: []string{"-h", "0"}, want: &GetsOptions{}},
		{name: "--json", args: []string{"--json"}, want: &GetsOptions{JSON: true}},
		{name: "value missing", args: []string{"-h"}, out: "option 'h' requires arg\n"},
		badLetter[GetsOptions](),
	})
}

func TestNewCmdHostStatus(t *testing.T) {
	testParse(t, NewCmdHostStatus, []parseCase[HostStatusOptions]{
		{name: "none", want: &HostStatusOptions{}},
		{name: "-s", args: []string{"-s", "LS:1:/p:0"}, want: &HostStatusOptions{Lockspace: "LS"}},
		{name: "-D", args: []string{"-D"}, want: &HostStatusOptions{Debug: true}},
		{name: "--json", args: []string{"--json"}, want: &HostStatusOptions{JSON: true}},
		badLetter[HostStatusOptions](),
	})
}

func TestNewCmdRenewal(t *testing.T) {
	testParse(t, NewCmdRenewal, []parseCase[RenewalOptions]{
		{name: "-s", args: []string{"-s", "LS"}, want: &RenewalOptions{Lockspace: "LS"}},
		{name: "--json", args: []string{"-s", "LS", "--json"}, want: &RenewalOptions{Lockspace: "LS", JSON: true}},
		badLetter[RenewalOptions](),
	})
}

func TestNewCmdLogDump(t *testing.T) {
	testParse(t, NewCmdLogDump, []parseCase[LogDumpOptions]{
		{name: "none", want: &LogDumpOptions{}},
		{name: "--json is not taken", args: []string{"--json"},
			out: "unknown option --json\nspace required before option value\n"},
		badLetter[LogDumpOptions](),
	})
}

func TestNewCmdSetEvent(t *testing.T) {
	testParse(t, NewCmdSetEvent, []parseCase[SetEventOptions]{
		{name: "-s", args: []string{"-s", "LS"}, want: &SetEventOptions{Lockspace: "LS"}},
		{name: "-i", args: []string{"-i", "9"}, want: &SetEventOptions{Event: client.HostEvent{HostID: 9}}},
		{name: "-g base 0", args: []string{"-g", "0x4"}, want: &SetEventOptions{Event: client.HostEvent{Generation: 4}}},
		{name: "-e base 0", args: []string{"-e", "0x11"}, want: &SetEventOptions{Event: client.HostEvent{Event: 0x11}}},
		{name: "-d octal", args: []string{"-d", "010"}, want: &SetEventOptions{Event: client.HostEvent{Data: 8}}},
		badLetter[SetEventOptions](),
	})
}

func TestNewCmdSetConfig(t *testing.T) {
	testParse(t, NewCmdSetConfig, []parseCase[SetConfigOptions]{
		{name: "-s", args: []string{"-s", "LS"}, want: &SetConfigOptions{Lockspace: "LS"}},
		{name: "-u 1", args: []string{"-u", "1"}, want: &SetConfigOptions{Value: client.ConfigUsed}},
		{name: "-u abc is 0", args: []string{"-u", "abc"}, want: &SetConfigOptions{Value: client.ConfigUnused}},
		{name: "-O wins", args: []string{"-u", "1", "-O", "7"}, want: &SetConfigOptions{Value: client.ConfigUsedByOrphans}},
		{name: "-O 0", args: []string{"-O", "0"}, want: &SetConfigOptions{Value: client.ConfigUnusedByOrphans}},
		badLetter[SetConfigOptions](),
	})
}

func TestNewCmdShutdown(t *testing.T) {
	testParse(t, NewCmdShutdown, []parseCase[ShutdownOptions]{
		{name: "none", want: &ShutdownOptions{}},
		{name: "-f", args: []string{"-f", "1"}, want: &ShutdownOptions{Force: 1}},
		{name: "-w", args: []string{"-w", "1"}, want: &ShutdownOptions{Wait: 1}},
		badLetter[ShutdownOptions](),
	})
}

func TestNewCmdInit(t *testing.T) {
	for _, action := range []string{"init", "write"} {
		t.Run(action, func(t *testing.T) {
			newCmd := func(f *Factory, runF func(*InitOptions) error) *cobra.Command { return NewCmdInit(f, action, runF) }
			testParse(t, newCmd, []parseCase[InitOptions]{
				{name: "none", want: &InitOptions{IOTimeout: 10}},
				{name: "-s", args: []string{"-s", "LS:1:/p:0"}, want: &InitOptions{Lockspace: ls("LS:1:/p:0"), IOTimeout: 10}},
				{name: "first -r", args: []string{"-r", "LS:R:/p:1M", "-r", "LS:Q"},
					want: &InitOptions{Resource: resp(t, "LS:R:/p:1M"), IOTimeout: 10}},
				{name: "-Z -A", args: []string{"-Z", "4096", "-A", "8M"},
					want: &InitOptions{SizeFlags: diskfmt.FlagSector4K | diskfmt.FlagAlign8M, IOTimeout: 10}},
				{name: "-m", args: []string{"-m", "250"}, want: &InitOptions{MaxHosts: 250, IOTimeout: 10}},
				{name: "-n", args: []string{"-n", "4"}, want: &InitOptions{NumHosts: 4, IOTimeout: 10}},
				{name: "-z any value", args: []string{"-z", "0"}, want: &InitOptions{Clear: true, IOTimeout: 10}},
				{name: "-o", args: []string{"-o", "3"}, want: &InitOptions{IOTimeout: 3}},
				{name: "bad -Z/-A pair", args: []string{"-Z", "512", "-A", "2M"},
					out: "Invalid sector_size/align_size combination (512/2097152)\nUse one of: 512/1M, 4096/1M, 4096/2M, 4096/4M, 4096/8M.\n"},
				badLetter[InitOptions](),
			})
		})
	}
}

func TestNewCmdRead(t *testing.T) {
	testParse(t, NewCmdRead, []parseCase[ReadOptions]{
		{name: "-s", args: []string{"-s", "LS:1:/p:0"}, want: &ReadOptions{Lockspace: ls("LS:1:/p:0")}},
		{name: "-r", args: []string{"-r", "LS:R:/p:0"}, want: &ReadOptions{Resource: resp(t, "LS:R:/p:0")}},
		{name: "-Z -A", args: []string{"-Z", "512", "-A", "1M"}, want: &ReadOptions{SizeFlags: diskfmt.FlagSector512 | diskfmt.FlagAlign1M}},
		{name: "-h is owners", args: []string{"-h", "1"}, want: &ReadOptions{Owners: true}},
		{name: "-D", args: []string{"-D"}, want: &ReadOptions{Debug: true}},
		{name: "bad -r goes on", args: []string{"-r", "ab"}, want: &ReadOptions{}, out: "resource arg parse error -6\n\n"},
		badLetter[ReadOptions](),
	})
}

func TestNewCmdAlign(t *testing.T) {
	testParse(t, NewCmdAlign, []parseCase[AlignOptions]{
		{name: "-s", args: []string{"-s", "LS:1:/p:1M"}, want: &AlignOptions{Disk: ls("LS:1:/p:1M").Disk}},
		badLetter[AlignOptions](),
	})
}

func TestNewCmdAddLockspace(t *testing.T) {
	testParse(t, NewCmdAddLockspace, []parseCase[AddLockspaceOptions]{
		{name: "-s", args: []string{"-s", "LS:1:/p:0"}, want: &AddLockspaceOptions{Lockspace: ls("LS:1:/p:0"), IOTimeout: 10}},
		{name: "-o", args: []string{"-o", "5"}, want: &AddLockspaceOptions{IOTimeout: 5}},
		{name: "-o 0 is ignored", args: []string{"-o", "0"}, want: &AddLockspaceOptions{IOTimeout: 10}},
		badLetter[AddLockspaceOptions](),
	})
}

func TestNewCmdInqLockspace(t *testing.T) {
	testParse(t, NewCmdInqLockspace, []parseCase[InqLockspaceOptions]{
		{name: "-s", args: []string{"-s", "LS:1:/p:0"}, want: &InqLockspaceOptions{Lockspace: ls("LS:1:/p:0")}},
		badLetter[InqLockspaceOptions](),
	})
}

func TestNewCmdRemLockspace(t *testing.T) {
	testParse(t, NewCmdRemLockspace, []parseCase[RemLockspaceOptions]{
		{name: "-s", args: []string{"-s", "LS:1:/p:0"}, want: &RemLockspaceOptions{Lockspace: ls("LS:1:/p:0")}},
		badLetter[RemLockspaceOptions](),
	})
}

func TestNewCmdCommand(t *testing.T) {
	testParse(t, NewCmdCommand, []parseCase[CommandOptions]{
		{name: "-r", args: []string{"-r", "LS:R:/p:0", "-r", "LS:Q:/p:1M"},
			want: &CommandOptions{LeaseArgs: LeaseArgs{Resources: []client.Resource{res(t, "LS:R:/p:0"), res(t, "LS:Q:/p:1M")}}}},
		{name: "-P", args: []string{"-P", "1"}, want: &CommandOptions{LeaseArgs: LeaseArgs{Persistent: true}}},
		{name: "-n", args: []string{"-n", "3"}, want: &CommandOptions{LeaseArgs: LeaseArgs{NumHosts: 3}}},
		{name: "-O", args: []string{"-O", "1"}, want: &CommandOptions{LeaseArgs: LeaseArgs{Orphan: true}}},
		{name: "-h", args: []string{"-h", "1"}, want: &CommandOptions{Owner: true}},
		{name: "-c ends the scan", args: []string{"-c", "/bin/echo", "-p", "x", "-Dx"},
			want: &CommandOptions{Path: "/bin/echo", Args: []string{"-p", "x", "-Dx"}}},
		badLetter[CommandOptions](),
	})
}

func TestNewCmdAcquire(t *testing.T) {
	testParse(t, NewCmdAcquire, []parseCase[AcquireOptions]{
		{name: "none", want: &AcquireOptions{Target: Target{Pid: -1}}},
		{name: "-r", args: []string{"-r", "LS:R:/p:1048576"},
			want: &AcquireOptions{LeaseArgs: LeaseArgs{Resources: []client.Resource{res(t, "LS:R:/p:1048576")}}, Target: Target{Pid: -1}}},
		{name: "-p", args: []string{"-p", "12"}, want: &AcquireOptions{Target: Target{Pid: 12}}},
		{name: "-C", args: []string{"-C", "5"}, want: &AcquireOptions{Target: Target{Pid: -1, ClientID: 5, ForClient: true}}},
		{name: "-P", args: []string{"-P", "1"}, want: &AcquireOptions{LeaseArgs: LeaseArgs{Persistent: true}, Target: Target{Pid: -1}}},
		{name: "-n", args: []string{"-n", "2"}, want: &AcquireOptions{LeaseArgs: LeaseArgs{NumHosts: 2}, Target: Target{Pid: -1}}},
		{name: "-O", args: []string{"-O", "1"}, want: &AcquireOptions{LeaseArgs: LeaseArgs{Orphan: true}, Target: Target{Pid: -1}}},
		{name: "--wait", args: []string{"--wait", "2s"}, want: &AcquireOptions{Target: Target{Pid: -1}, Wait: 2 * time.Second}},
		{name: "--wait seconds", args: []string{"--wait", "3"}, want: &AcquireOptions{Target: Target{Pid: -1}, Wait: 3 * time.Second}},
		{name: "-D", args: []string{"-D"}, want: &AcquireOptions{Target: Target{Pid: -1}, Debug: true}},
		{name: "--wait needs a value", args: []string{"--wait"}, out: "option '--wait' requires arg\n"},
		badLetter[AcquireOptions](),
	})
}

func TestNewCmdConvert(t *testing.T) {
	testParse(t, NewCmdConvert, []parseCase[ConvertOptions]{
		{name: "-r", args: []string{"-r", "LS:R"}, want: &ConvertOptions{Resource: resp(t, "LS:R"), Target: Target{Pid: -1}}},
		{name: "-p", args: []string{"-p", "7"}, want: &ConvertOptions{Target: Target{Pid: 7}}},
		badLetter[ConvertOptions](),
	})
}

func TestNewCmdRelease(t *testing.T) {
	testParse(t, NewCmdRelease, []parseCase[ReleaseOptions]{
		{name: "-r", args: []string{"-r", "LS:R"}, want: &ReleaseOptions{Resources: []client.Resource{res(t, "LS:R")}, Target: Target{Pid: -1}}},
		{name: "-s", args: []string{"-s", "LS"}, want: &ReleaseOptions{Lockspace: "LS", Target: Target{Pid: -1}}},
		{name: "-p", args: []string{"-p", "7"}, want: &ReleaseOptions{Target: Target{Pid: 7}}},
		{name: "-a", args: []string{"-a", "1"}, want: &ReleaseOptions{Target: Target{Pid: -1}, All: true}},
		{name: "-O", args: []string{"-O", "1"}, want: &ReleaseOptions{Target: Target{Pid: -1}, Orphan: true}},
		{name: "--wait is acquire's only", args: []string{"--wait", "1s"},
			out: "unknown option --wait\nspace required before option value\n"},
		badLetter[ReleaseOptions](),
	})
}

func TestNewCmdInquire(t *testing.T) {
	testParse(t, NewCmdInquire, []parseCase[InquireOptions]{
		{name: "-p", args: []string{"-p", "7"}, want: &InquireOptions{Target: Target{Pid: 7}}},
		{name: "-C", args: []string{"-C", "3"}, want: &InquireOptions{Target: Target{Pid: -1, ClientID: 3, ForClient: true}}},
		{name: "-D", args: []string{"-D"}, want: &InquireOptions{Target: Target{Pid: -1}, Debug: true}},
		{name: "--json", args: []string{"--json"}, want: &InquireOptions{Target: Target{Pid: -1}, JSON: true}},
		badLetter[InquireOptions](),
	})
}

func TestNewCmdRequest(t *testing.T) {
	testParse(t, NewCmdRequest, []parseCase[RequestOptions]{
		{name: "-r", args: []string{"-r", "LS:R:/p:0"}, want: &RequestOptions{Resource: resp(t, "LS:R:/p:0")}},
		{name: "-f", args: []string{"-f", "2"}, want: &RequestOptions{Force: 2}},
		badLetter[RequestOptions](),
	})
}

func TestNewCmdExamine(t *testing.T) {
	testParse(t, NewCmdExamine, []parseCase[ExamineOptions]{
		{name: "-r", args: []string{"-r", "LS:R:/p:0"}, want: &ExamineOptions{Resource: resp(t, "LS:R:/p:0")}},
		{name: "-s", args: []string{"-s", "LS:1:/p:0"}, want: &ExamineOptions{Lockspace: ls("LS:1:/p:0")}},
		badLetter[ExamineOptions](),
	})
}

func TestNewCmdRindexActions(t *testing.T) {
	rx := *client.ParseRIndex("LS:/p:1M")
	t.Run("format", func(t *testing.T) {
		testParse(t, NewCmdFormat, []parseCase[FormatOptions]{
			{name: "-x", args: []string{"-x", "LS:/p:1M"}, want: &FormatOptions{RIndex: rx}},
			{name: "-Z -A", args: []string{"-Z", "4096", "-A", "1M"}, want: &FormatOptions{SizeFlags: diskfmt.FlagSector4K | diskfmt.FlagAlign1M}},
			badLetter[FormatOptions](),
		})
	})
	t.Run("create", func(t *testing.T) {
		testParse(t, NewCmdCreate, []parseCase[CreateOptions]{
			{name: "-x", args: []string{"-x", "LS:/p:1M"}, want: &CreateOptions{RIndex: rx}},
			{name: "-e", args: []string{"-e", "R1"}, want: &CreateOptions{Entry: rentryArg{Name: "R1"}}},
			{name: "-m", args: []string{"-m", "9"}, want: &CreateOptions{MaxHosts: 9}},
			{name: "-n", args: []string{"-n", "2"}, want: &CreateOptions{NumHosts: 2}},
			badLetter[CreateOptions](),
		})
	})
	t.Run("delete", func(t *testing.T) {
		testParse(t, NewCmdDelete, []parseCase[DeleteOptions]{
			{name: "-x", args: []string{"-x", "LS:/p:1M"}, want: &DeleteOptions{RIndex: rx}},
			{name: "-e", args: []string{"-e", "R1:2M"}, want: &DeleteOptions{Entry: rentryArg{Name: "R1", Offset: 2 << 20}}},
			badLetter[DeleteOptions](),
		})
	})
	t.Run("lookup", func(t *testing.T) {
		testParse(t, NewCmdLookup, []parseCase[LookupOptions]{
			{name: "-x", args: []string{"-x", "LS:/p:1M"}, want: &LookupOptions{RIndex: rx}},
			{name: "-e offset alone", args: []string{"-e", ":3145728"}, want: &LookupOptions{Entry: rentryArg{Offset: 3 << 20}}},
			badLetter[LookupOptions](),
		})
	})
	t.Run("update", func(t *testing.T) {
		testParse(t, NewCmdUpdate, []parseCase[UpdateOptions]{
			{name: "-x", args: []string{"-x", "LS:/p:1M"}, want: &UpdateOptions{RIndex: rx}},
			{name: "-e", args: []string{"-e", "R1"}, want: &UpdateOptions{Entry: rentryArg{Name: "R1"}}},
			{name: "-z", args: []string{"-z", "1"}, want: &UpdateOptions{Remove: true}},
			badLetter[UpdateOptions](),
		})
	})
	t.Run("rebuild", func(t *testing.T) {
		testParse(t, NewCmdRebuild, []parseCase[RebuildOptions]{
			{name: "-x", args: []string{"-x", "LS:/p:1M"}, want: &RebuildOptions{RIndex: rx}},
			badLetter[RebuildOptions](),
		})
	})
}

func TestNewCmdClientVersion(t *testing.T) {
	testParse(t, NewCmdClientVersion, []parseCase[ClientVersionOptions]{
		{name: "none", want: &ClientVersionOptions{}},
		badLetter[ClientVersionOptions](),
	})
}

func TestNewCmdReexec(t *testing.T) {
	testParse(t, NewCmdReexec, []parseCase[ReexecOptions]{
		{name: "none", want: &ReexecOptions{}},
		{name: "-e", args: []string{"-e", "/usr/sbin/sanlock.new"}, want: &ReexecOptions{Path: "/usr/sbin/sanlock.new"}},
		badLetter[ReexecOptions](),
	})
}

func TestNewCmdLocks(t *testing.T) {
	testParse(t, NewCmdLocks, []parseCase[LocksOptions]{
		{name: "none", want: &LocksOptions{}},
		{name: "-s", args: []string{"-s", "LS"}, want: &LocksOptions{Lockspace: "LS"}},
		{name: "-r", args: []string{"-r", "LS:R:/p:0"}, want: &LocksOptions{Resources: []client.Resource{res(t, "LS:R:/p:0")}}},
		{name: "--json", args: []string{"--json"}, want: &LocksOptions{JSON: true}},
		badLetter[LocksOptions](),
	})
}

// TestEveryClientActionHasACommand: the tree has one command per action
// of the table, by the same name.
func TestEveryClientActionHasACommand(t *testing.T) {
	f := testFactory(&bytes.Buffer{}, &bytes.Buffer{})
	for _, a := range clientActionList {
		assert.Equal(t, a.name(), newClientActionCmd(f, a.name()).Name())
	}
}
