package cli

import (
	"bytes"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestCNumbers(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{{"5", 5}, {" 12x", 12}, {"x", 0}, {"-3", -3}, {"+7", 7}, {"", 0}, {"4294967297", 1}} {
		if got := atoi(c.in); got != c.want {
			t.Errorf("atoi(%q) = %d, want %d", c.in, got, c.want)
		}
	}
	for _, c := range []struct {
		in   string
		base int
		want uint64
		ok   bool
	}{
		{"0x10", 0, 16, true}, {"010", 0, 8, true}, {"10", 0, 10, true}, {"-1", 0, 1<<64 - 1, true},
		{"0x", 0, 0, true}, {"zz", 0, 0, false}, {"99999999999999999999999", 10, 1<<64 - 1, true},
		{"12abc", 10, 12, true},
	} {
		got, ok := strtoull(c.in, c.base)
		if got != c.want || ok != c.ok {
			t.Errorf("strtoull(%q, %d) = %d, %v; want %d, %v", c.in, c.base, got, ok, c.want, c.ok)
		}
	}
}

func TestParseRentryDump(t *testing.T) {
	for in, want := range map[string]rentryArg{
		"foo": {"foo", 0}, "foo:6M": {"foo", 6 << 20}, ":7340032": {"", 7340032}, "": {}, "foo:0": {"foo", 0},
	} {
		if got := parseRentry(in); got != want {
			t.Errorf("parseRentry(%q) = %+v, want %+v", in, got, want)
		}
	}
	for in, want := range map[string]dumpArg{
		"/p":          {"/p", 0, 0},
		"/p:1M":       {"/p", 1 << 20, 0},
		"/p:1M:2M":    {"/p", 1 << 20, 2 << 20},
		"/p:100:512":  {"/p", 100, 512},
		`/a\:b:4M:1M`: {"/a:b", 4 << 20, 1 << 20},
	} {
		if got := parseDumpPath(in); got != want {
			t.Errorf("parseDumpPath(%q) = %+v, want %+v", in, got, want)
		}
	}
	// next_free reads its offset with atoll: "1M" is byte 1.
	if got := parseNextFreePath("/p:1M"); got != (dumpArg{Path: "/p", Offset: 1}) {
		t.Errorf("parseNextFreePath = %+v", got)
	}
}

func TestScanOptions(t *testing.T) {
	for _, c := range []struct {
		mode, action string
		args         []string
		out          string // messages (error lines, then printed notes)
		err          bool
		check        func(*options) bool
	}{
		{"direct", "init", []string{"-Dx"}, "unknown option -Dx\nspace required before option value\n", true, nil},
		{"direct", "init", []string{"--foo"}, "unknown option --foo\nspace required before option value\n", true, nil},
		{"direct", "init", []string{"-o5"}, "unknown option -o5\nspace required before option value\n", true, nil},
		{"direct", "init", []string{"x"}, "unknown option x\nspace required before option value\n", true, nil},
		{"direct", "init", []string{"-s"}, "option 's' requires arg\n", true, nil},
		{"client", "version", []string{"-q"}, "option 'q' requires arg\n", true, nil},
		{"direct", "init", []string{"-q", "1"}, "unknown option: q\n", true, nil},
		{"direct", "init", []string{"--"}, "option '-' requires arg\n", true, nil},
		{"direct", "init", []string{"-A", "1M"}, "Invalid sector_size/align_size combination (0/1048576)\nUse one of: 512/1M, 4096/1M, 4096/2M, 4096/4M, 4096/8M.\n", true, nil},
		{"direct", "init", []string{"-Z", "512", "-A", "2M"}, "Invalid sector_size/align_size combination (512/2097152)\nUse one of: 512/1M, 4096/1M, 4096/2M, 4096/4M, 4096/8M.\n", true, nil},
		{"direct", "init", []string{"-A", "3M"}, "", false, func(o *options) bool { return o.align == 0 }},
		{"direct", "init", []string{"-Z", "4096"}, "", false, func(o *options) bool { return o.sector == 4096 && o.sizeFlags() == 0x200 }},
		{"direct", "init", []string{"-Z", "1024"}, "", false, func(o *options) bool { return o.sizeFlags() == 0 }},
		{"direct", "init", []string{"-D", "-D", "-z", "0"}, "", false, func(o *options) bool { return o.debug && o.clear }},
		{"client", "command", []string{"-r", "LS:R", "-c", "/bin/x", "-Dx", "-q"}, "", false, func(o *options) bool {
			return o.command == "/bin/x" && reflect.DeepEqual(o.commandArgs, []string{"-Dx", "-q"})
		}},
		{"direct", "init", []string{"-r", "ab", "-r", "LS:R"}, "resource arg parse error -6\n\n", false, func(o *options) bool { return len(o.resources) == 1 }},
		{"direct", "init", strings.Fields(strings.Repeat("-r LS:R ", 10)), "resource args over max 8\nresource args over max 8\n", false,
			func(o *options) bool { return len(o.resources) == 8 }},
		{"direct", "init", []string{"-o", "0"}, "", false, func(o *options) bool { return o.cfg.IOTimeout == 10 && o.leaseIOTimeout() == 10 }},
		{"direct", "init", []string{"-o", "-5"}, "", false, func(o *options) bool { return o.cfg.IOTimeout == 10 && o.leaseIOTimeout() == 65531 }},
		{"direct", "init", []string{"-o", "3"}, "", false, func(o *options) bool { return o.cfg.IOTimeout == 3 && o.leaseIOTimeout() == 3 }},
		{"client", "status", []string{"-o", "p"}, "", false, func(o *options) bool { return o.sortArg == 'p' && o.cfg.IOTimeout == 10 }},
		{"client", "set_event", []string{"-e", "0x11", "-g", "0x4", "-i", "9", "-d", "010"}, "", false, func(o *options) bool {
			return o.eventStr == "0x11" && o.generation == 4 && o.hostID == 9 && o.data == 8
		}},
		{"daemon", "", []string{"-g", "70", "-t", "1", "-e", "host"}, "", false, func(o *options) bool {
			return o.cfg.KillGraceSeconds == 40 && o.cfg.MaxWorkerThreads == 2 && o.cfg.OurHostName == "host"
		}},
		{"client", "gets", []string{"-h", "1"}, "", false, func(o *options) bool { return o.getHosts == 1 && !o.cfg.HighPriority }},
		{"daemon", "", []string{"-X", "1"}, "", false, func(o *options) bool { return o.cfg.StrictPeer }},
		{"daemon", "", []string{"-X", "0"}, "", false, func(o *options) bool { return !o.cfg.StrictPeer }},
		{"client", "status", []string{"-X", "1"}, "unknown option: X\n", true, nil},
		{"direct", "dump", []string{"/p", "-f", "2"}, "", false, func(o *options) bool { return o.pathArg == "/p" && o.force == 2 }},
		{"direct", "dump", []string{"-f", "1"}, "unknown option 1\nspace required before option value\n", true, nil},
		{"direct", "dump", nil, "", true, nil},
	} {
		o := defaultOptions()
		var out bytes.Buffer
		err := scanOptions(o, c.mode, c.action, c.args, &out)
		msg := out.String()
		if ue, ok := err.(*usageError); ok {
			for _, l := range ue.lines {
				msg += l + "\n"
			}
		}
		if (err != nil) != c.err || msg != c.out {
			t.Errorf("%s %s %q: err %v, output %q; want err %v, %q", c.mode, c.action, c.args, err, msg, c.err, c.out)
			continue
		}
		if c.check != nil && !c.check(o) {
			t.Errorf("%s %s %q: options %+v", c.mode, c.action, c.args, o)
		}
	}
}

func TestConfigFile(t *testing.T) {
	p := t.TempDir() + "/sanlock.conf"
	conf := "# comment\n\nquiet_fail = 0\nmax_worker_threads=5\nrenewal_history_size   =   7\n" +
		"our_host_name = cfghost\ndebug_cmd = -status\ndebug_cmd=+inq_lockspace\nmax_sectors_kb = align\n" +
		"sh_retries=3\nio_timeout = 4\nunknown_key = 1\nuse_aio 0\n" + strings.Repeat("x", 200) + "\n"
	if err := writeFile(p, conf); err != nil {
		t.Fatal(err)
	}
	o := defaultOptions()
	readConfig(p, o)
	c := o.cfg
	if c.QuietFail || c.MaxWorkerThreads != 5 || c.RenewalHistorySize != 7 || c.OurHostName != "cfghost" ||
		c.DebugCmds != 0xfffffffffe07ffdf || !c.MaxSectorsKBAlign || c.ShRetries != 3 || c.IOTimeout != 4 || !c.UseAIO {
		t.Errorf("config not applied: %+v", o)
	}
	// The command line overrides the file, and direct I/O uses it.
	var out bytes.Buffer
	if err := scanOptions(o, "direct", "init", []string{"-o", "6"}, &out); err != nil || o.cfg.IOTimeout != 6 {
		t.Errorf("-o after config: %v %d", err, o.cfg.IOTimeout)
	}
	o = defaultOptions()
	readConfig(p+".missing", o)
	if !reflect.DeepEqual(o, defaultOptions()) {
		t.Error("missing config changed options")
	}
}

func TestDispatch(t *testing.T) {
	t.Setenv("SANLOCK_RUN_DIR", "/nonexistent/run")
	t.Setenv("SANLOCK_LOG_FILE", filepath.Join(t.TempDir(), "sanlock.log"))
	for _, c := range []struct {
		args []string
		out  string
		rc   int
	}{
		{[]string{"direct", "foo", "-Dx"}, "direct action \"foo\" is unknown\n", 1},
		{[]string{"client", "foo"}, "client action \"foo\" is unknown\n", 1},
		{[]string{"foo", "-q"}, "client action \"foo\" is unknown\n", 1},
		{[]string{"client", "help"}, "client action \"help\" is unknown\n", 1},
		{[]string{"direct", "version"}, "direct action \"version\" is unknown\n", 1},
		{[]string{"version", "foo"}, "3.8.5\n", 0},
		{[]string{"client", "status", "-Dx"}, "unknown option -Dx\nspace required before option value\n", 1},
		{[]string{"status"}, "", 1}, // no daemon: silent
		{[]string{"gets"}, "gets error -2\n", 1},
		{[]string{"daemon", "-q"}, "option 'q' requires arg\n", 1},
		{[]string{"daemon", "-D", "-w", "0"}, "", 1}, // run dir cannot be created: logged, exit 1
		{[]string{"direct", "dump"}, "", 1},
		{[]string{"direct", "next_free"}, "", 1},
		{[]string{"direct", "dump", "/nonexistent/x:1"}, "WARNING: dump offset should be a multiple of 1048576 bytes.\nDevice /nonexistent/x not found.\n", 1},
		{[]string{"direct", "init"}, "init done -22\n", 1},
		{[]string{"direct", "init", "-s", "LS:0:/nonexistent/x:0"}, "init done -19\n", 1},
		{[]string{"direct", "init", "-s", "LS:0:/nonexistent/x:0", "-Z", "4096"}, "init done -1\n", 1},
		{[]string{"direct", "init", "-r", "LS:R:/nonexistent/x:0"}, "init done -2\n", 1},
		{[]string{"direct", "init", "-r", "LS:R1"}, "init done -19\n", 1},
		{[]string{"direct", "format", "-x", "LS:/nonexistent/x:0", "-Z", "4096"}, "format done -2\n", 1},
	} {
		got, rc := runMain(t, c.args...)
		if got != c.out || rc != c.rc {
			t.Errorf("%q: %q %d; want %q %d", c.args, got, rc, c.out, c.rc)
		}
	}
}
