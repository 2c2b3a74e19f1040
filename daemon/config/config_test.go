package config

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAtoi(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"", 0}, {"12", 12}, {"  -3", -3}, {"+7x", 7}, {"x7", 0}, {"0x10", 0},
		{"4294967296", 0}, {"2147483648", -2147483648}, {"99999999999999999999", -1},
	} {
		assert.Equal(t, tc.want, Atoi(tc.in), "atoi(%q)", tc.in)
	}
}

func TestDefaultsAndEnv(t *testing.T) {
	cfg := DefaultConfig()
	assert.Equal(t, DefaultRunDir, cfg.RunDir)
	assert.True(t, cfg.Privileged)
	assert.Equal(t, uint64(0xfffffffffe06ffff), cfg.DebugCmds)
	assert.Equal(t, 10, cfg.RenewalReadExtend())

	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	for _, tc := range []struct {
		env        map[string]string
		dir        string
		privileged bool
	}{
		{map[string]string{}, DefaultRunDir, true},
		{map[string]string{EnvPrivileged: "1", EnvRunDir: "/tmp/x"}, "/tmp/x", true},
		{map[string]string{EnvPrivileged: "0"}, DefaultRunDir, false},
		{map[string]string{EnvPrivileged: ""}, DefaultRunDir, false},
		{map[string]string{EnvPrivileged: "yes", EnvRunDir: ""}, DefaultRunDir, false},
	} {
		c := DefaultConfig()
		c.ApplyEnv(env(tc.env))
		assert.Equal(t, tc.dir, c.RunDir, "%v", tc.env)
		assert.Equal(t, tc.privileged, c.Privileged, "%v", tc.env)
	}
}

func TestApplyOption(t *testing.T) {
	cfg := DefaultConfig()
	for _, o := range []struct {
		l byte
		v string
	}{
		{'D', ""}, {'Q', "0"}, {'R', "1"}, {'H', "7"}, {'L', "-1"}, {'S', "7"}, {'U', "nobody"}, {'G', "nogroup"},
		{'t', "1"}, {'g', "61"}, {'o', "0"}, {'w', "0"}, {'h', "1"}, {'l', "2"}, {'b', "30"},
		{'e', strings.Repeat("h", 60)}, {'a', "0"},
	} {
		require.NoError(t, cfg.ApplyOption(o.l, o.v), "-%c", o.l)
	}
	assert.True(t, cfg.Debug)
	assert.False(t, cfg.QuietFail)
	assert.True(t, cfg.DebugRenew)
	assert.Equal(t, 7, cfg.RenewalHistorySize)
	assert.Equal(t, -1, cfg.LogfilePriority)
	assert.Equal(t, 7, cfg.SyslogPriority)
	assert.Equal(t, "nobody", cfg.UserName)
	assert.Equal(t, "nogroup", cfg.GroupName)
	assert.Equal(t, 2, cfg.MaxWorkerThreads, "values < 2 become 2")
	assert.Equal(t, 40, cfg.KillGraceSeconds, "out of range ignored")
	assert.Equal(t, 10, cfg.IOTimeout, "-o 0 keeps the previous value")
	assert.False(t, cfg.UseWatchdog)
	assert.True(t, cfg.HighPriority)
	assert.Equal(t, 2, cfg.MlockLevel)
	assert.Equal(t, 30, cfg.SetBitmapSeconds)
	assert.Len(t, cfg.OurHostName, 48)
	assert.False(t, cfg.UseAIO)

	require.NoError(t, cfg.ApplyOption('o', "3"))
	assert.Equal(t, 3, cfg.IOTimeout)
	require.NoError(t, cfg.ApplyOption('g', "0"))
	assert.Equal(t, 0, cfg.KillGraceSeconds)
	err := cfg.ApplyOption('s', "LS")
	assert.True(t, errors.Is(err, ErrBadOption))
}

// TestConfigKeys replays the config file verified against 3.8.5 (docs/cli.md "Config file").
func TestConfigKeys(t *testing.T) {
	cfg := DefaultConfig()
	for _, kv := range [][2]string{
		{"quiet_fail", "0"}, {"max_worker_threads", "5"}, {"renewal_history_size", "7"},
		{"our_host_name", "cfghost"}, {"debug_cmd", "-status"}, {"debug_cmd", "+inq_lockspace"},
		{"max_sectors_kb", "align"}, {"sh_retries", "3"},
	} {
		assert.True(t, cfg.ApplyConfigKey(kv[0], kv[1]), kv[0])
	}
	assert.False(t, cfg.QuietFail)
	assert.Equal(t, 5, cfg.MaxWorkerThreads)
	assert.Equal(t, 7, cfg.RenewalHistorySize)
	assert.Equal(t, "cfghost", cfg.OurHostName)
	assert.Equal(t, uint64(0xfffffffffe07ffdf), cfg.DebugCmds)
	assert.True(t, cfg.MaxSectorsKBAlign)
	assert.Equal(t, 0, cfg.MaxSectorsKBNum)
	assert.Equal(t, 3, cfg.ShRetries)

	c := DefaultConfig()
	assert.False(t, c.ApplyConfigKey("no_such_key", "1"))
	c.ApplyConfigKey("debug_cmd", "-all")
	assert.Zero(t, c.DebugCmds)
	c.ApplyConfigKey("debug_cmd", "+all")
	assert.Equal(t, ^uint64(0), c.DebugCmds)
	c.ApplyConfigKey("debug_cmd", "+bogus")
	assert.Equal(t, ^uint64(0), c.DebugCmds)
	c.ApplyConfigKey("io_timeout", "0")
	assert.Equal(t, 10, c.IOTimeout)
	c.ApplyConfigKey("io_timeout", "5")
	c.ApplyConfigKey("watchdog_fire_timeout", "20")
	c.ApplyConfigKey("kill_grace_seconds", "100")
	assert.Equal(t, 5, c.IOTimeout)
	assert.Equal(t, 20, c.WatchdogFireTimeout)
	assert.Equal(t, 0, c.KillGraceSeconds, "100 is out of range; fire 20 gives 0")
	c.ApplyConfigKey("renewal_read_extend_sec", "0")
	assert.Equal(t, 0, c.RenewalReadExtend())
	c.ApplyConfigKey("max_sectors_kb", "ignore")
	assert.True(t, c.MaxSectorsKBIgnore)
	c.ApplyConfigKey("max_sectors_kb", "513")
	assert.Equal(t, 1024, c.MaxSectorsKBNum, "odd value ignored")
	c.ApplyConfigKey("max_sectors_kb", "512")
	assert.Equal(t, 512, c.MaxSectorsKBNum)
	c.ApplyConfigKey("debug_io", "submit,complete")
	assert.True(t, c.DebugIOSubmit && c.DebugIOComplete)
	c.ApplyConfigKey("uname", "sanlock")
	c.ApplyConfigKey("gname", "disk")
	assert.Equal(t, "sanlock", c.UserName)
	assert.Equal(t, "disk", c.GroupName)
	c.ApplyConfigKey("logfile_use_utc", "1")
	assert.True(t, c.LogfileUseUTC)
}

func TestResolveIDs(t *testing.T) {
	c := DefaultConfig()
	c.UserName, c.GroupName = "root", "root"
	c.ResolveIDs()
	assert.Equal(t, 0, c.UID)
	assert.Equal(t, 0, c.GID)
	c = DefaultConfig()
	c.UserName = "no-such-user-gs"
	c.ResolveIDs()
	assert.Equal(t, 0, c.UID)
}

// An unknown -U/-G name gives sanlock 3.8.5's warning lines (measured:
// "user 'X' not found, using uid: 0", and "using uid" for the group too),
// logged first at start.
func TestResolveIDsUnknownNames(t *testing.T) {
	c := DefaultConfig()
	c.UserName, c.GroupName = "gosanlock-no-such-user", "gosanlock-no-such-group"
	c.ResolveIDs()
	assert.Equal(t, 0, c.UID)
	assert.Equal(t, 0, c.GID)
	assert.Equal(t, []string{
		"user 'gosanlock-no-such-user' not found, using uid: 0",
		"group 'gosanlock-no-such-group' not found, using uid: 0",
	}, c.idWarnings)

	c = DefaultConfig()
	c.UserName, c.GroupName = "root", "root"
	c.ResolveIDs()
	assert.Empty(t, c.idWarnings)
}

func TestLogFormatKey(t *testing.T) {
	c := DefaultConfig()
	require.Equal(t, "", c.LogFormat, "text by default")
	require.True(t, c.ApplyConfigKey("log_format", "json"))
	require.Equal(t, LogFormatJSON, c.LogFormat)
	require.True(t, c.ApplyConfigKey("log_format", "yaml"), "a known key with a bad value is ignored")
	require.Equal(t, LogFormatJSON, c.LogFormat)
	require.True(t, c.ApplyConfigKey("log_format", "text"))
	require.Equal(t, LogFormatText, c.LogFormat)
}

func TestMetricsAddressConfig(t *testing.T) {
	c := DefaultConfig()
	assert.Empty(t, c.MetricsAddress, "metrics are opt-in")
	require.True(t, c.ApplyConfigKey("metrics_address", "127.0.0.1:9310"))
	assert.Equal(t, "127.0.0.1:9310", c.MetricsAddress)
	require.NoError(t, c.ApplyOption('M', "9400"))
	assert.Equal(t, "9400", c.MetricsAddress)
}

// The kill_grace_seconds a daemon uses depends on watchdog_fire_timeout
// unless -g or the key sets it, whatever the order (measured on 3.9.5
// and 5.1.1: fire 60 and up 40, 30..59 15, below 30 0).
func TestKillGraceFollowsFireTimeout(t *testing.T) {
	for _, tc := range []struct{ fire, want int }{
		{1, 0}, {10, 0}, {29, 0}, {30, 15}, {45, 15}, {59, 15}, {60, 40}, {61, 40}, {120, 40},
	} {
		c := DefaultConfig()
		c.ApplyConfigKey("watchdog_fire_timeout", fmt.Sprint(tc.fire))
		assert.Equal(t, tc.want, c.KillGraceSeconds, "fire %d", tc.fire)
		assert.Equal(t, tc.want, KillGraceFor(tc.fire))
	}
	for _, steps := range [][][2]string{
		{{"watchdog_fire_timeout", "30"}, {"kill_grace_seconds", "25"}},
		{{"kill_grace_seconds", "25"}, {"watchdog_fire_timeout", "30"}},
		{{"watchdog_fire_timeout", "30"}, {"-g", "25"}},
		{{"-g", "25"}, {"watchdog_fire_timeout", "10"}},
	} {
		c := DefaultConfig()
		for _, kv := range steps {
			if kv[0] == "-g" {
				require.NoError(t, c.ApplyOption('g', kv[1]))
			} else {
				c.ApplyConfigKey(kv[0], kv[1])
			}
		}
		assert.Equal(t, 25, c.KillGraceSeconds, "%v", steps)
	}
	// Out of range: ignored, and the value stays derived.
	c := DefaultConfig()
	c.ApplyConfigKey("watchdog_fire_timeout", "30")
	c.ApplyConfigKey("kill_grace_seconds", "61")
	assert.Equal(t, 15, c.KillGraceSeconds)
	c.ApplyConfigKey("watchdog_fire_timeout", "0")
	c.ApplyConfigKey("watchdog_fire_timeout", "-5")
	assert.Equal(t, 30, c.WatchdogFireTimeout, "values <= 0 ignored")
}

// The keys 3.9.5 and 5.1.1 added, with the values they accept (measured:
// other values keep the previous one; names are case sensitive).
func TestNewerKeys(t *testing.T) {
	c := DefaultConfig()
	assert.Equal(t, 1, c.DebugHosts)
	assert.Equal(t, "all", c.UseHugepages)
	assert.Equal(t, "yes", c.UseCompareAndWrite)
	assert.Equal(t, 1, c.CawFUA)
	assert.Equal(t, 1, c.CawDPO)
	for _, kv := range [][2]string{
		{"debug_hosts", "2"}, {"use_hugepages", "none"}, {"use_hugepages", "foo"}, {"use_hugepages", "None"},
		{"use_compare_and_write", "no"}, {"use_compare_and_write", "foo"}, {"use_compare_and_write", "NO"},
		{"caw_fua", "0"}, {"caw_dpo", "0"},
	} {
		assert.True(t, c.ApplyConfigKey(kv[0], kv[1]), kv[0])
	}
	assert.Equal(t, 2, c.DebugHosts)
	assert.Equal(t, "none", c.UseHugepages)
	assert.Equal(t, "no", c.UseCompareAndWrite)
	assert.Zero(t, c.CawFUA)
	assert.Zero(t, c.CawDPO)
	c.ApplyConfigKey("use_compare_and_write", "allow")
	c.ApplyConfigKey("use_hugepages", "all")
	c.ApplyConfigKey("debug_hosts", "none")
	assert.Equal(t, "allow", c.UseCompareAndWrite)
	assert.Equal(t, "all", c.UseHugepages)
	assert.Zero(t, c.DebugHosts, "atoi")
}

// -e and our_host_name are cut to 48 bytes; the value given is kept for
// the daemon's "shortened" log line.
func TestHostNameShortened(t *testing.T) {
	c := DefaultConfig()
	_, cut := c.HostNameShortened()
	assert.False(t, cut)
	long := strings.Repeat("h", 60)
	require.NoError(t, c.ApplyOption('e', long))
	assert.Equal(t, long[:48], c.OurHostName)
	got, cut := c.HostNameShortened()
	assert.True(t, cut)
	assert.Equal(t, long, got)
	c.ApplyConfigKey("our_host_name", strings.Repeat("c", 48))
	_, cut = c.HostNameShortened()
	assert.False(t, cut, "48 bytes fit")
}

// The product uuid is used when it has 16 to 48 bytes, as read (case and
// blanks kept), then ".<nodename>", cut to 48 (measured on 3.9.5).
func TestProductUUIDHostName(t *testing.T) {
	for _, tc := range []struct {
		uuid, want, reason string
	}{
		{"4C4C4544-0036-4710-8052-B8C04F4E4A32", "4C4C4544-0036-4710-8052-B8C04F4E4A32.vm", ""},
		{strings.Repeat("a", 16), strings.Repeat("a", 16) + ".vm", ""},
		{strings.Repeat("a", 46), strings.Repeat("a", 46) + ".v", ""},
		{strings.Repeat("a", 48), strings.Repeat("a", 48), ""},
		{strings.Repeat("a", 15), "", "Ignore product_uuid that is too short 15 (aaaaaaaaaaaaaaa)"},
		{"", "", "Ignore product_uuid that is too short 0 ()"},
		{strings.Repeat("a", 49), "", "Ignore product_uuid that is too long 49 (" + strings.Repeat("a", 49) + ")"},
	} {
		name, reason, ok := ProductUUIDHostName(tc.uuid, "vm")
		assert.Equal(t, tc.want, name, tc.uuid)
		assert.Equal(t, tc.reason, reason, tc.uuid)
		assert.Equal(t, tc.reason == "", ok, tc.uuid)
	}
}

// The DAEMON record's keys are 5.1.1's, in its order (compared with the
// real daemons in daemon/newerinterop).
func TestStatusTextKeys(t *testing.T) {
	c := DefaultConfig()
	c.SetIDs(0, 0)
	text := c.StatusText("h", 7, 1, 2, "3.8.5", 0x03080500)
	var keys []string
	for _, kv := range strings.Split(text, " ") {
		k, _, ok := strings.Cut(kv, "=")
		require.True(t, ok, kv)
		keys = append(keys, k)
	}
	assert.Equal(t, []string{"our_host_name", "use_watchdog", "high_priority", "mlock_level", "quiet_fail",
		"debug_renew", "debug_hosts", "debug_clients", "debug_cmds", "renewal_history_size", "gid", "uid",
		"sh_retries", "max_sectors_kb_ignore", "max_sectors_kb_align", "max_sectors_kb_num",
		"max_worker_threads", "num_worker_threads", "use_hugepages", "write_init_io_timeout", "use_aio",
		"io_timeout", "use_compare_and_write", "watchdog_fire_timeout", "kill_grace_seconds", "helper_pid",
		"helper_kill_fd", "helper_full_count", "helper_last_status", "monotime", "version_str", "version_num",
		"version_hex", "smproto_hex", "create_delta_34", "create_delta_40", "create_paxos_64"}, keys)
	assert.Contains(t, text, " debug_hosts=1 ")
	assert.Contains(t, text, " use_hugepages=all ")
	assert.Contains(t, text, " io_timeout=10 use_compare_and_write=yes watchdog_fire_timeout=60 kill_grace_seconds=40 ")
	assert.Contains(t, text, " version_str=3.8.5 version_num=3.8.5 version_hex=03080500 smproto_hex=00000001 ")
}

func TestCreateVersionKeys(t *testing.T) {
	apply := func(kv ...string) *Config {
		c := DefaultConfig()
		for i := 0; i < len(kv); i += 2 {
			c.ApplyConfigKey(kv[i], kv[i+1])
		}
		return c
	}
	c := apply()
	assert.Equal(t, DeltaVersion34, c.DeltaCreateVersion())
	assert.Equal(t, PaxosVersion64, c.PaxosCreateVersion())
	c = apply("create_delta_disk_version", "5.0", "create_paxos_disk_version", "7.0")
	assert.Equal(t, DeltaVersion50, c.DeltaCreateVersion())
	assert.Equal(t, PaxosVersion70, c.PaxosCreateVersion())
	c = apply("create_delta_disk_version", "4.0", "create_delta_disk_version", "x", "create_paxos_disk_version", "6.5")
	assert.Equal(t, DeltaVersion40, c.DeltaCreateVersion(), "unknown values are ignored")
	assert.Equal(t, PaxosVersion64, c.PaxosCreateVersion())
	// 5.x's keys win over ours; 3.4 wins over 4.0 in either order; values
	// are compared exactly (5.1.1: "3.40" sets nothing).
	c = apply("create_delta_disk_version", "5.0", "create_old_delta_disk_version", "4.0",
		"create_paxos_disk_version", "7.0", "create_old_paxos_disk_version", "6.4")
	assert.Equal(t, DeltaVersion40, c.DeltaCreateVersion())
	assert.Equal(t, PaxosVersion64, c.PaxosCreateVersion())
	c = apply("create_old_delta_disk_version", "3.4", "create_old_delta_disk_version", "4.0")
	assert.Equal(t, DeltaVersion34, c.DeltaCreateVersion())
	c = apply("create_delta_disk_version", "5.0", "create_old_delta_disk_version", "3.40", "create_old_paxos_disk_version", "7.0")
	assert.Equal(t, DeltaVersion50, c.DeltaCreateVersion())
	assert.Equal(t, PaxosVersion64, c.PaxosCreateVersion())
}

// create_delta_34, create_delta_40 and create_paxos_64 in the DAEMON
// record follow 5.x's create_old_*_disk_version keys.
func TestStatusTextCreateOld(t *testing.T) {
	c := DefaultConfig()
	assert.True(t, strings.HasSuffix(c.StatusText("h", 1, 1, 1, "3.8.5", 0x03080500), " create_delta_34=0 create_delta_40=0 create_paxos_64=0"))
	c.ApplyConfigKey("create_old_delta_disk_version", "4.0")
	c.ApplyConfigKey("create_old_paxos_disk_version", "6.4")
	assert.True(t, strings.HasSuffix(c.StatusText("h", 1, 1, 1, "3.8.5", 0x03080500), " create_delta_34=0 create_delta_40=1 create_paxos_64=1"))
}

// TestApplyFileWarnings: every line of sanlock.conf the daemon does not act
// on leaves one warning naming the file and the line; the lines it acts on
// are applied as before.
func TestApplyFileWarnings(t *testing.T) {
	dir := t.TempDir()
	p := dir + "/sanlock.conf"
	conf := "# comment\n" + // 1
		"\n" + // 2
		"io_timeout = 5\n" + // 3
		"use_watchdgo = 0\n" + // 4
		"debug_hosts = 2\n" + // 5
		"use_watchdog 0\n" + // 6
		"   \n" + // 7
		" io_timeout = 7\n" + // 8
		"use_compare_and_write = no\n" + // 9
		"quiet_fail=0\n" + // 10
		strings.Repeat("x", 130) + "\n" + // 11: read as "xxx...x" (127) and "xxx\n"
		"max_worker_threads = 4\n" + // 12
		"log_format=json" // 13, no newline at the end
	require.NoError(t, os.WriteFile(p, []byte(conf), 0o644))
	c := DefaultConfig()
	c.ApplyFile(p)
	assert.Equal(t, []string{
		p + `:4: unknown key "use_watchdgo" (ignored)`,
		p + `:5: key "debug_hosts" accepted, no effect (shown in status -D)`,
		p + `:6: no "=" after key "use_watchdog" (ignored)`,
		p + `:8: no key at the start of the line (ignored)`,
		p + `:9: key "use_compare_and_write" accepted, no effect (SCSI COMPARE AND WRITE is not implemented)`,
		p + `:10: key "quiet_fail" accepted, no effect (shown in status -D)`,
		p + `:11: line longer than 127 characters: read as several lines`,
		p + `:11: no "=" after key "` + strings.Repeat("x", 127) + `" (ignored)`,
		p + `:11: no "=" after key "xxx" (ignored)`,
		p + `:12: key "max_worker_threads" accepted, no effect (there are no worker threads; shown in status -D)`,
	}, c.FileWarnings())
	assert.Equal(t, 5, c.IOTimeout)
	assert.True(t, c.UseWatchdog, "a key without '=' sets nothing")
	assert.Equal(t, 2, c.DebugHosts)
	assert.Equal(t, "no", c.UseCompareAndWrite)
	assert.False(t, c.QuietFail)
	assert.Equal(t, 4, c.MaxWorkerThreads)
	assert.Equal(t, LogFormatJSON, c.LogFormat)
	assert.Equal(t, c.FileWarnings(), c.Warnings(), "no id warnings before ResolveIDs")

	// A missing file changes nothing and says nothing, as in sanlock; one
	// that cannot be read is named.
	c = DefaultConfig()
	c.ApplyFile(dir + "/missing.conf")
	assert.Equal(t, DefaultConfig(), c)
	c.ApplyFile(dir)
	require.Len(t, c.FileWarnings(), 1)
	assert.Equal(t, dir+": cannot read: is a directory (ignored)", c.FileWarnings()[0])

	// Every key IgnoredKey names is one ApplyConfigKey knows.
	for k := range ignoredKeys {
		assert.True(t, DefaultConfig().ApplyConfigKey(k, "1"), k)
		_, ok := IgnoredKey(k)
		assert.True(t, ok, k)
	}
	_, ok := IgnoredKey("io_timeout")
	assert.False(t, ok)
}

// TestInstalledConfigFile: the commented sanlock.conf that is installed
// makes the daemon warn about nothing, and each key it shows (as
// "#key = value") is one the daemon knows.
func TestInstalledConfigFile(t *testing.T) {
	const p = "../../contrib/sanlock.conf"
	c := DefaultConfig()
	c.ApplyFile(p)
	assert.Empty(t, c.FileWarnings())
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		key, _, ok := strings.Cut(strings.TrimPrefix(l, "#"), " = ")
		if !ok || !strings.HasPrefix(l, "#") || strings.ContainsAny(key, " \t") {
			continue
		}
		n++
		assert.True(t, DefaultConfig().ApplyConfigKey(key, ""), key)
	}
	assert.Greater(t, n, 30)
}
