package config

import (
	"errors"
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
	assert.Equal(t, 40, c.KillGraceSeconds)
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
