// Package config is the settings of `sanlock daemon`: the 3.8.5 defaults,
// the command-line options, the sanlock.conf keys and the environment
// (docs/cli.md "Daemon options", "Config file", "Environment"), parsed as
// sanlock parses them. It knows nothing of sockets or of the lease
// manager; daemon turns a Config into a running server.
package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/gosanlock/gosanlock/internal/cnum"
	"github.com/gosanlock/gosanlock/wire"
)

// Defaults of the daemon (docs/cli.md "Daemon defaults", "Config file"; README: 3.8.5 defaults).
const (
	DefaultRunDir             = "/run/sanlock"
	DefaultLogFile            = "/var/log/sanlock.log"
	DefaultConfigFile         = "/etc/sanlock/sanlock.conf"
	DefaultLogfilePriority    = 4 // LOG_WARNING
	DefaultSyslogPriority     = 3 // LOG_ERR
	DefaultNamesLogPriority   = 4
	DefaultRenewalHistorySize = 180
	DefaultMaxWorkerThreads   = 8
	MinWorkerThreads          = 2
	DefaultKillGraceSeconds   = 40
	MaxKillGraceSeconds       = 60
	DefaultDebugHosts         = 1
	DefaultUseHugepages       = "all"
	DefaultUseCompareAndWrite = "yes"
	DefaultCawFUA             = 1
	DefaultCawDPO             = 1
	// MinProductUUIDLen and HostNameLen bound the product uuid
	// a generated host name starts with (ProductUUIDHostName).
	MinProductUUIDLen          = 16
	DefaultIOTimeout           = 10
	DefaultWatchdogFireTimeout = 60
	DefaultWriteInitIOTimeout  = 60
	DefaultShRetries           = 8
	DefaultMaxSectorsKBNum     = 1024
	MaxMaxSectorsKB            = 8192
	// DefaultDebugCmds has bit N set for command N: everything except
	// inq_lockspace, get_lockspaces, get_hosts, read_lockspace,
	// read_resource, read_resource_owners and write_resource.
	DefaultDebugCmds uint64 = 0xfffffffffe06ffff

	// HostNameLen is the longest host name (SANLK_NAME_LEN).
	HostNameLen = wire.NameLen

	// DefaultLogRingSize is the size of the in-memory log returned by
	// LOG_DUMP (docs/cli.md "Logging").
	DefaultLogRingSize = 1 << 20
)

// Log formats of the log file and of -D's stderr (config key log_format, a
// gosanlock addition). The in-memory log of log_dump and syslog always
// keep sanlock's text lines, which existing tools parse.
const (
	LogFormatText = "text"
	LogFormatJSON = "json"
)

// Environment variables read by the daemon (docs/cli.md "Environment").
const (
	EnvRunDir     = "SANLOCK_RUN_DIR"
	EnvPrivileged = "SANLOCK_PRIVILEGED"
	// EnvDaemonized marks the background child started by Daemonize; it is
	// ours, not sanlock's, and is removed from the environment by Run.
	EnvDaemonized = "GOSANLOCK_DAEMONIZED"
	// EnvWdmdSocket names another wdmd socket than /run/wdmd/wdmd.sock (ours:
	// several emulated hosts, each with its own wdmd, on one machine).
	EnvWdmdSocket = "SANLOCK_WDMD_SOCKET"
	// EnvGenerationDir names another directory than /var/lib/sanlock for
	// the lockspace generation files (ours).
	EnvGenerationDir = "SANLOCK_GENERATION_DIR"
	// DefaultGenerationDir is 5.1.1's directory of the generation files.
	DefaultGenerationDir = "/var/lib/sanlock"
	// EnvLogFile names another log file than /var/log/sanlock.log (ours:
	// tests and several daemons on one machine keep their logs apart).
	EnvLogFile = "SANLOCK_LOG_FILE"
)

// Config holds every setting of `sanlock daemon`: the command-line options of
// docs/cli.md "Daemon options", the config-file keys of "Config file" and the environment of
// "Environment". Start from DefaultConfig, then apply the config file (ApplyConfigKey), then
// the command line (ApplyOption), then the environment (ApplyEnv).
type Config struct {
	Debug              bool   // -D: stay in the foreground and log everything to stderr
	QuietFail          bool   // -Q, quiet_fail
	DebugRenew         bool   // -R, debug_renew
	RenewalHistorySize int    // -H, renewal_history_size (0 disables)
	LogfilePriority    int    // -L, logfile_priority (-1: no log file)
	SyslogPriority     int    // -S, syslog_priority (-1: no syslog)
	NamesLogPriority   int    // names_log_priority (accepted, unused)
	LogfileUseUTC      bool   // logfile_use_utc: UTC timestamps in every sink
	LogFormat          string // log_format: "text" (default) or "json" (ours), log file and -D stderr

	// User and group: -U/-G or uname/gname. Empty names fall back to the
	// sanlock user and group when both exist, else uid = gid = 0 (docs/cli.md "Daemon defaults").
	UserName  string
	GroupName string
	UID       int
	GID       int
	idsSet    bool
	// idWarnings are the "user/group not found" lines ResolveIDs produced
	// (IDWarnings).
	idWarnings []string
	// fileWarnings are the config-file lines ApplyFile did not act on
	// (FileWarnings).
	fileWarnings []string

	MaxWorkerThreads int // -t, max_worker_threads (min 2)
	// KillGraceSeconds is -g, kill_grace_seconds (0..60). Unless one of
	// them sets it, it follows watchdog_fire_timeout as 3.9.5 derives it
	// (KillGraceFor); killGraceSet records that it was set.
	KillGraceSeconds int
	killGraceSet     bool
	// IOTimeout is -o, io_timeout (> 0): the io_timeout of an
	// add_lockspace or write_lockspace that passes 0 (as 3.9.5 and
	// 5.1.1), and the client and direct modes' default.
	IOTimeout           int
	WatchdogFireTimeout int // watchdog_fire_timeout (> 0): W of host_dead_seconds = 8 x io_timeout + W, and the wdmd device timeout
	// DebugHosts is debug_hosts (3.9.5+, default 1): accepted and shown
	// in STATUS; our host processing logs the same at every value.
	DebugHosts int
	// UseHugepages is use_hugepages (3.9.5+): "all" (default) or "none";
	// other values are ignored. Accepted and shown; we allocate no huge
	// pages either way.
	UseHugepages string
	// UseCompareAndWrite is use_compare_and_write (5.1.1): "yes"
	// (default), "allow" or "no"; CawFUA and CawDPO are caw_fua and
	// caw_dpo (default 1). Accepted and shown; SCSI COMPARE AND WRITE
	// is not implemented, leases are always written as on a plain device.
	UseCompareAndWrite string
	CawFUA             int
	CawDPO             int
	UseWatchdog        bool // -w, use_watchdog
	HighPriority       bool // -h, high_priority (SCHED_RR)
	MlockLevel         int  // -l, mlock_level: 0 none, 1 current, 2 current+future
	SetBitmapSeconds   int  // -b: 0 = 6 x the lockspace io_timeout
	// OurHostName is -e, our_host_name, cut to 48 bytes; hostNameLong
	// keeps the value given when it was longer (HostNameShortened).
	OurHostName  string
	hostNameLong string
	UseAIO       bool // -a, use_aio

	ShRetries            int    // sh_retries
	RenewalReadExtendSec int    // renewal_read_extend_sec (valid when RenewalReadExtendSet)
	RenewalReadExtendSet bool   // false: renewal_read_extend_sec = io_timeout
	WriteInitIOTimeout   int    // write_init_io_timeout (> 0)
	PaxosDebugAll        bool   // paxos_debug_all
	DebugIOSubmit        bool   // debug_io contains "submit"
	DebugIOComplete      bool   // debug_io contains "complete"
	DebugClients         bool   // debug_clients
	DebugCmds            uint64 // debug_cmd: bit N logs command N
	MaxSectorsKBIgnore   bool   // max_sectors_kb = ignore
	MaxSectorsKBAlign    bool   // max_sectors_kb = align
	MaxSectorsKBNum      int    // max_sectors_kb = <even number <= 8192>

	// On-disk versions written by init (docs/compat.md "On-disk format
	// versions"): CreateDeltaVersion and CreatePaxosVersion are ours
	// (create_delta_disk_version 3.4|4.0|5.0, create_paxos_disk_version
	// 6.4|7.0; default 3.4 and 6.4, which every release reads).
	// CreateDelta34, CreateDelta40 and CreatePaxos64 are sanlock 5.x's
	// create_old_delta_disk_version = 3.4|4.0 and
	// create_old_paxos_disk_version = 6.4, which win over ours
	// (DeltaCreateVersion, PaxosCreateVersion).
	CreateDeltaVersion uint32
	CreatePaxosVersion uint32
	CreateDelta34      bool
	CreateDelta40      bool
	CreatePaxos64      bool

	// StrictPeer (ours: -X, strict_peer; off by default) lets a peer that
	// is not root or in the daemon's group act only for its own pid
	// (strict.go, docs/security.md).
	StrictPeer bool

	// MetricsAddress (ours: -M, metrics_address; "" = off) is where the
	// Prometheus endpoint listens (metrics.ResolveAddress, docs/metrics.md).
	MetricsAddress string

	// Environment and paths.
	RunDir     string // SANLOCK_RUN_DIR
	WdmdSocket string // SANLOCK_WDMD_SOCKET ("": wdmd's fixed socket)
	// GenerationDir is where the generation of each joined lockspace is
	// kept as text (delta_lease_LS_HOSTID), as 5.1.1 does, when that
	// directory exists ("": nowhere); SANLOCK_GENERATION_DIR (ours).
	GenerationDir string
	Privileged    bool // SANLOCK_PRIVILEGED unset or "1"
	// LogFile is the log file path ("" = none). sanlock uses a fixed path;
	// tests point it elsewhere.
	LogFile string
	// LogRingSize is the size of the in-memory log returned by LOG_DUMP.
	LogRingSize int
	// MaxPayload bounds the payload a connection may announce before
	// anything is allocated (0 = wire.DefaultMaxPayload).
	MaxPayload int
	// MaxConns is the size of the connection table including the two
	// internal slots (0 = 1024, as in sanlock).
	MaxConns int
}

// DefaultConfig returns the 3.8.5 defaults, without reading the environment.
func DefaultConfig() *Config {
	return &Config{
		QuietFail:           true,
		RenewalHistorySize:  DefaultRenewalHistorySize,
		LogfilePriority:     DefaultLogfilePriority,
		SyslogPriority:      DefaultSyslogPriority,
		NamesLogPriority:    DefaultNamesLogPriority,
		MaxWorkerThreads:    DefaultMaxWorkerThreads,
		KillGraceSeconds:    DefaultKillGraceSeconds,
		IOTimeout:           DefaultIOTimeout,
		WatchdogFireTimeout: DefaultWatchdogFireTimeout,
		DebugHosts:          DefaultDebugHosts,
		UseHugepages:        DefaultUseHugepages,
		UseCompareAndWrite:  DefaultUseCompareAndWrite,
		CawFUA:              DefaultCawFUA,
		CawDPO:              DefaultCawDPO,
		UseWatchdog:         true,
		MlockLevel:          1,
		UseAIO:              true,
		ShRetries:           DefaultShRetries,
		WriteInitIOTimeout:  DefaultWriteInitIOTimeout,
		CreateDeltaVersion:  DeltaVersion34,
		CreatePaxosVersion:  PaxosVersion64,
		DebugCmds:           DefaultDebugCmds,
		MaxSectorsKBNum:     DefaultMaxSectorsKBNum,
		RunDir:              DefaultRunDir,
		Privileged:          true,
		LogFile:             DefaultLogFile,
		LogRingSize:         DefaultLogRingSize,
		GenerationDir:       DefaultGenerationDir,
	}
}

// ApplyEnv reads SANLOCK_RUN_DIR and SANLOCK_PRIVILEGED through lookupEnv
// (os.LookupEnv when nil), and our additions SANLOCK_WDMD_SOCKET and
// SANLOCK_LOG_FILE. sanlock reads only the first two (docs/cli.md "Environment"):
// an empty run dir keeps the default; SANLOCK_PRIVILEGED unset means
// privileged, exactly "1" privileged, anything else unprivileged.
func (c *Config) ApplyEnv(lookupEnv func(string) (string, bool)) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	if d, _ := lookupEnv(EnvRunDir); d != "" {
		c.RunDir = d
	}
	if v, ok := lookupEnv(EnvPrivileged); ok {
		c.Privileged = v == "1"
	}
	if p, _ := lookupEnv(EnvWdmdSocket); p != "" {
		c.WdmdSocket = p
	}
	if p, _ := lookupEnv(EnvLogFile); p != "" {
		c.LogFile = p
	}
	if p, _ := lookupEnv(EnvGenerationDir); p != "" {
		c.GenerationDir = p
	}
}

// ErrBadOption is returned (wrapped) by ApplyOption for letters that are not
// daemon options.
var ErrBadOption = errors.New("daemon: not a daemon option")

// ApplyOption applies one daemon command-line option (docs/cli.md "Options", "Daemon options").
// letter is the option character; value is ignored for 'D'. Numbers are
// parsed like C atoi. Options outside docs/cli.md "Daemon options" return ErrBadOption; the CLI
// accepts and ignores them in daemon mode.
func (c *Config) ApplyOption(letter byte, value string) error {
	switch letter {
	case 'D':
		c.Debug = true
	case 'b':
		c.SetBitmapSeconds = Atoi(value)
	default:
		key, ok := optionKeys[letter]
		if !ok {
			return fmt.Errorf("%w: -%c", ErrBadOption, letter)
		}
		c.ApplyConfigKey(key, value)
	}
	return nil
}

// optionKeys maps each daemon option to the sanlock.conf key with the same
// meaning, so both are applied by ApplyConfigKey.
var optionKeys = map[byte]string{
	'Q': "quiet_fail",
	'R': "debug_renew",
	'H': "renewal_history_size",
	'L': "logfile_priority",
	'S': "syslog_priority",
	'U': "uname",
	'G': "gname",
	't': "max_worker_threads",
	'g': "kill_grace_seconds",
	'o': "io_timeout",
	'w': "use_watchdog",
	'h': "high_priority",
	'l': "mlock_level",
	'e': "our_host_name",
	'a': "use_aio",
	'X': "strict_peer",     // ours; sanlock 3.8.5 has no -X
	'M': "metrics_address", // ours; sanlock 3.8.5 has no -M
}

// ApplyConfigKey applies one key/value pair of sanlock.conf (docs/cli.md "Config file").
// ApplyFile parses the file; value is the first token after '='. Unknown keys
// are ignored, and so are out-of-range values, as in sanlock. It reports
// whether the key was recognised (IgnoredKey tells which recognised keys
// have no effect).
func (c *Config) ApplyConfigKey(key, value string) bool {
	v := Atoi(value)
	switch key {
	case "quiet_fail":
		c.QuietFail = v != 0
	case "debug_renew":
		c.DebugRenew = v != 0
	case "use_aio":
		c.UseAIO = v != 0
	case "logfile_priority":
		c.LogfilePriority = v
	case "logfile_use_utc":
		c.LogfileUseUTC = v != 0
	case "log_format": // gosanlock: "text" or "json"; other values are ignored
		if value == LogFormatText || value == LogFormatJSON {
			c.LogFormat = value
		}
	case "syslog_priority":
		c.SyslogPriority = v
	case "names_log_priority":
		c.NamesLogPriority = v
	case "use_watchdog":
		c.UseWatchdog = v != 0
	case "io_timeout":
		if v > 0 {
			c.IOTimeout = v
		}
	case "watchdog_fire_timeout":
		if v > 0 {
			c.WatchdogFireTimeout = v
			if !c.killGraceSet {
				c.KillGraceSeconds = KillGraceFor(v)
			}
		}
	case "kill_grace_seconds":
		if v >= 0 && v <= MaxKillGraceSeconds {
			c.KillGraceSeconds = v
			c.killGraceSet = true
		}
	case "debug_hosts":
		c.DebugHosts = v
	case "use_hugepages":
		if value == "all" || value == "none" {
			c.UseHugepages = value
		}
	case "use_compare_and_write":
		if value == "yes" || value == "allow" || value == "no" {
			c.UseCompareAndWrite = value
		}
	case "caw_fua":
		c.CawFUA = v
	case "caw_dpo":
		c.CawDPO = v
	case "high_priority":
		c.HighPriority = v != 0
	case "mlock_level":
		c.MlockLevel = v
	case "sh_retries":
		c.ShRetries = v
	case "uname":
		c.UserName = value
		c.idsSet = false
	case "gname":
		c.GroupName = value
		c.idsSet = false
	case "our_host_name":
		c.OurHostName = truncName(value)
		if len(value) > HostNameLen {
			c.hostNameLong = value
		} else {
			c.hostNameLong = ""
		}
	case "renewal_read_extend_sec":
		c.RenewalReadExtendSec = v
		c.RenewalReadExtendSet = true
	case "write_init_io_timeout":
		if v > 0 {
			c.WriteInitIOTimeout = v
		}
	case "renewal_history_size":
		c.RenewalHistorySize = v
	case "paxos_debug_all":
		c.PaxosDebugAll = v != 0
	case "debug_io":
		c.DebugIOSubmit = strings.Contains(value, "submit")
		c.DebugIOComplete = strings.Contains(value, "complete")
	case "debug_clients":
		c.DebugClients = v != 0
	case "debug_cmd":
		c.applyDebugCmd(value)
	case "max_sectors_kb":
		switch {
		case value == "ignore":
			c.MaxSectorsKBIgnore = true
		case value == "align":
			c.MaxSectorsKBAlign = true
			c.MaxSectorsKBNum = 0
		case v > 0 && v%2 == 0 && v <= MaxMaxSectorsKB:
			c.MaxSectorsKBNum = v
		}
	case "max_worker_threads":
		c.MaxWorkerThreads = max(v, MinWorkerThreads)
	case "create_delta_disk_version":
		if d, ok := deltaVersions[value]; ok {
			c.CreateDeltaVersion = d
		}
	case "create_paxos_disk_version":
		if p, ok := paxosVersions[value]; ok {
			c.CreatePaxosVersion = p
		}
	case "create_old_delta_disk_version": // values as 5.x: exact, other values set nothing
		switch value {
		case "3.4":
			c.CreateDelta34 = true
		case "4.0":
			c.CreateDelta40 = true
		}
	case "create_old_paxos_disk_version":
		if value == "6.4" {
			c.CreatePaxos64 = true
		}
	case "strict_peer":
		c.StrictPeer = v != 0
	case "metrics_address": // checked when the daemon starts
		c.MetricsAddress = value
	default:
		return false
	}
	return true
}

// The on-disk versions init can write (diskfmt.DeltaVersion,
// DeltaVersion40, DeltaVersion50, PaxosVersion, PaxosVersion70).
const (
	DeltaVersion34 uint32 = 0x00030004
	DeltaVersion40 uint32 = 0x00040000
	DeltaVersion50 uint32 = 0x00050000
	PaxosVersion64 uint32 = 0x00060004
	PaxosVersion70 uint32 = 0x00070000
)

var (
	deltaVersions = map[string]uint32{"3.4": DeltaVersion34, "4.0": DeltaVersion40, "5.0": DeltaVersion50}
	paxosVersions = map[string]uint32{"6.4": PaxosVersion64, "7.0": PaxosVersion70}
)

// DeltaCreateVersion is the delta lease version init writes: 5.x's
// create_old_delta_disk_version when set (3.4 before 4.0, as 5.x), else
// create_delta_disk_version.
func (c *Config) DeltaCreateVersion() uint32 {
	switch {
	case c.CreateDelta34:
		return DeltaVersion34
	case c.CreateDelta40:
		return DeltaVersion40
	case c.CreateDeltaVersion != 0:
		return c.CreateDeltaVersion
	}
	return DeltaVersion34
}

// PaxosCreateVersion is the paxos leader version init writes:
// create_old_paxos_disk_version = 6.4 when set, else
// create_paxos_disk_version.
func (c *Config) PaxosCreateVersion() uint32 {
	switch {
	case c.CreatePaxos64:
		return PaxosVersion64
	case c.CreatePaxosVersion != 0:
		return c.CreatePaxosVersion
	}
	return PaxosVersion64
}

// applyDebugCmd handles "+all", "-all", "+<debug name>", "-<debug name>".
func (c *Config) applyDebugCmd(value string) {
	if len(value) < 2 || (value[0] != '+' && value[0] != '-') {
		return
	}
	on, name := value[0] == '+', value[1:]
	var mask uint64
	if name == "all" {
		mask = math.MaxUint64
	} else if cmd, ok := wire.CmdByDebugName(name); ok {
		mask = 1 << uint(cmd)
	} else {
		return
	}
	if on {
		c.DebugCmds |= mask
	} else {
		c.DebugCmds &^= mask
	}
}

// DebugCmd reports whether command cmd is logged (debug_cmd).
func (c *Config) DebugCmd(cmd wire.Cmd) bool {
	return uint32(cmd) < 64 && c.DebugCmds&(1<<uint32(cmd)) != 0
}

// ResolveIDs fills UID/GID from the names: an unknown name gives 0; with
// neither name set, the user and group "sanlock" are used when both exist
// (docs/cli.md "Daemon defaults", "Options" -U/-G).
func (c *Config) ResolveIDs() {
	if c.idsSet {
		return
	}
	c.idsSet = true
	if c.UserName == "" && c.GroupName == "" {
		u, uerr := user.Lookup("sanlock")
		g, gerr := user.LookupGroup("sanlock")
		if uerr == nil && gerr == nil {
			c.UserName, c.GroupName = "sanlock", "sanlock"
			c.UID, _ = strconv.Atoi(u.Uid)
			c.GID, _ = strconv.Atoi(g.Gid)
			return
		}
		c.UID, c.GID = 0, 0
		return
	}
	c.UID, c.GID = 0, 0
	if c.UserName != "" {
		if u, err := user.Lookup(c.UserName); err == nil {
			c.UID, _ = strconv.Atoi(u.Uid)
		} else {
			c.idWarnings = append(c.idWarnings, fmt.Sprintf("user '%s' not found, using uid: %d", c.UserName, c.UID))
		}
	}
	if c.GroupName != "" {
		if g, err := user.LookupGroup(c.GroupName); err == nil {
			c.GID, _ = strconv.Atoi(g.Gid)
		} else {
			// sanlock 3.8.5 words it "using uid" here too (the gid is meant).
			c.idWarnings = append(c.idWarnings, fmt.Sprintf("group '%s' not found, using uid: %d", c.GroupName, c.GID))
		}
	}
}

// IDWarnings returns the "user/group not found" lines ResolveIDs produced;
// the daemon logs them first when it starts, as sanlock does.
func (c *Config) IDWarnings() []string { return c.idWarnings }

// TruncName cuts a host name to HostNameLen bytes.
func TruncName(s string) string { return truncName(s) }

// SetIDs sets the numeric ids directly (tests, or callers that resolved
// them already); ResolveIDs then keeps them.
func (c *Config) SetIDs(uid, gid int) {
	c.UID, c.GID, c.idsSet = uid, gid, true
}

// KillGraceFor is the kill_grace_seconds a daemon uses when neither -g
// nor kill_grace_seconds sets it, for watchdog_fire_timeout w (measured
// on 3.9.5 and 5.1.1, which derive it from w alone): 40 from 60 s up, 15
// from 30 to 59 s, 0 below 30 s, so that the holders are SIGKILLed well
// before the watchdog fires.
func KillGraceFor(w int) int {
	switch {
	case w >= DefaultWatchdogFireTimeout:
		return DefaultKillGraceSeconds
	case w >= 30:
		return 15
	}
	return 0
}

// HostNameShortened returns the -e / our_host_name value as given, and
// true, when it was longer than 48 bytes and cut (the daemon logs it).
func (c *Config) HostNameShortened() (string, bool) {
	return c.hostNameLong, c.hostNameLong != ""
}

// ProductUUIDHostName is the host name a daemon without -e or
// our_host_name takes from the machine's product uuid (the first line of
// /sys/devices/virtual/dmi/id/product_uuid, uuid as read): "<uuid>.<nodename>"
// cut to 48 bytes, as 3.9.5 and 5.1.1 do. A uuid shorter than 16 or
// longer than 48 bytes is not used: ok is false and reason says why.
func ProductUUIDHostName(uuid, nodename string) (name, reason string, ok bool) {
	switch {
	case len(uuid) < MinProductUUIDLen:
		return "", fmt.Sprintf("Ignore product_uuid that is too short %d (%s)", len(uuid), uuid), false
	case len(uuid) > HostNameLen:
		return "", fmt.Sprintf("Ignore product_uuid that is too long %d (%s)", len(uuid), uuid), false
	}
	return truncName(uuid + "." + nodename), "", true
}

// RenewalReadExtend returns renewal_read_extend_sec, defaulting to io_timeout.
func (c *Config) RenewalReadExtend() int {
	if c.RenewalReadExtendSet {
		return c.RenewalReadExtendSec
	}
	return c.IOTimeout
}

func truncName(s string) string {
	if len(s) > HostNameLen {
		return s[:HostNameLen]
	}
	return s
}

// Atoi parses like C atoi: optional leading white space and sign, then
// decimal digits up to the first non-digit; no digits gives 0. Values
// outside the long range saturate, then are truncated to 32 bits as glibc's
// (int)strtol does.
func Atoi(s string) int { return cnum.Atoi(s) }

// StatusText is the text of STATUS's DAEMON record (docs/protocol.md
// "Record texts"): the key list of 5.1.1, a superset of 3.8.5's and
// 3.9.5's in the same order. It holds the settings in effect, our host
// name, the daemon pid as helper_pid, the CLOCK_MONOTONIC seconds at
// start and now, and the version as text and as the 32-bit number of
// VERSION. create_delta_34, create_delta_40 and create_paxos_64 are 5.x's
// create_old_*_disk_version keys. num_worker_threads is 2, the workers a
// C daemon starts with: ours has no worker threads (each command runs on
// its connection's goroutine).
func (c *Config) StatusText(host string, pid int, startMon, now uint64, version string, v uint32) string {
	return fmt.Sprintf("our_host_name=%s use_watchdog=%d high_priority=%d mlock_level=%d quiet_fail=%d "+
		"debug_renew=%d debug_hosts=%d debug_clients=%d debug_cmds=0x%x renewal_history_size=%d gid=%d uid=%d "+
		"sh_retries=%d max_sectors_kb_ignore=%d max_sectors_kb_align=%d max_sectors_kb_num=%d "+
		"max_worker_threads=%d num_worker_threads=%d use_hugepages=%s write_init_io_timeout=%d use_aio=%d "+
		"io_timeout=%d use_compare_and_write=%s watchdog_fire_timeout=%d "+
		"kill_grace_seconds=%d helper_pid=%d helper_kill_fd=%d helper_full_count=%d helper_last_status=%d "+
		"monotime=%d version_str=%s version_num=%d.%d.%d version_hex=%08x smproto_hex=%08x "+
		"create_delta_34=%d create_delta_40=%d create_paxos_64=%d",
		host, b2i(c.UseWatchdog), b2i(c.HighPriority), c.MlockLevel, b2i(c.QuietFail),
		b2i(c.DebugRenew), c.DebugHosts, b2i(c.DebugClients), c.DebugCmds, c.RenewalHistorySize, c.GID, c.UID,
		c.ShRetries, b2i(c.MaxSectorsKBIgnore), b2i(c.MaxSectorsKBAlign), c.MaxSectorsKBNum,
		c.MaxWorkerThreads, MinWorkerThreads, c.UseHugepages, c.WriteInitIOTimeout, b2i(c.UseAIO),
		c.IOTimeout, c.UseCompareAndWrite, c.WatchdogFireTimeout,
		c.KillGraceSeconds, pid, -1, 0, startMon,
		now, version, v>>24, v>>16&0xff, v>>8&0xff, v, wire.ProtoVersion,
		b2i(c.CreateDelta34), b2i(c.CreateDelta40), b2i(c.CreatePaxos64))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
