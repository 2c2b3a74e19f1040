package cli

import (
	"bufio"
	"os"
	"strings"
)

// defaultConfigPath is the fixed location of the sanlock config file.
const defaultConfigPath = "/etc/sanlock/sanlock.conf"

// configLineMax is the longest line the reader takes at once; longer lines
// are read as several lines, as sanlock's 128-byte fgets buffer does.
const configLineMax = 127

// debugCmdBits maps the debug_cmd names to their command numbers (bit N of
// debug_cmds is command N; see wire.md).
var debugCmdBits = map[string]uint{
	"register":             1,
	"add_lockspace":        2,
	"rem_lockspace":        3,
	"shutdown":             4,
	"status":               5,
	"log_dump":             6,
	"acquire":              7,
	"release":              8,
	"inquire":              9,
	"restrict":             10,
	"request":              11,
	"align":                12,
	"examine_lockspace":    13,
	"examine_resource":     14,
	"host_status":          15,
	"inq_lockspace":        16,
	"killpath":             17,
	"write_lockspace":      18,
	"write_resource":       19,
	"read_lockspace":       20,
	"read_resource":        21,
	"get_lockspaces":       22,
	"get_hosts":            23,
	"read_resource_owners": 24,
	"set_lvb":              25,
	"get_lvb":              26,
	"convert":              27,
	"version":              28,
	"shutdown_wait":        29,
	"reg_event":            30,
	"end_event":            31,
	"set_event":            32,
	"set_config":           33,
	"renewal":              34,
	"format_rindex":        35,
	"update_rindex":        36,
	"lookup_rindex":        37,
	"create_resource":      38,
	"delete_resource":      39,
	"rebuild_rindex":       40,
}

// readConfig applies the config file at path to o. A missing or unreadable
// file is not an error.
func readConfig(path string, o *options) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for {
		line, err := readConfigLine(r)
		if line == "" && err != nil {
			return
		}
		applyConfigLine(line, o)
	}
}

// readConfigLine returns the next chunk of at most configLineMax bytes,
// ending at (and including) a newline when there is one.
func readConfigLine(r *bufio.Reader) (string, error) {
	var b strings.Builder
	for b.Len() < configLineMax {
		c, err := r.ReadByte()
		if err != nil {
			return b.String(), err
		}
		b.WriteByte(c)
		if c == '\n' {
			break
		}
	}
	return b.String(), nil
}

func applyConfigLine(line string, o *options) {
	if line == "" || line[0] == '#' || line[0] == '\n' {
		return
	}
	end := strings.IndexAny(line, " \t=\n")
	if end < 0 {
		end = len(line)
	}
	key := line[:end]
	eq := strings.IndexByte(line, '=')
	if eq < 0 {
		return // a key without a value sets nothing
	}
	val := ""
	if fs := strings.Fields(line[eq+1:]); len(fs) > 0 {
		val = fs[0]
	}
	n := atoi(val)
	switch key {
	case "quiet_fail":
		o.quietFail = n
	case "debug_renew":
		o.debugRenew = n
	case "use_aio":
		o.useAio = n
	case "logfile_priority":
		o.logfilePriority = n
	case "logfile_use_utc":
		o.logfileUseUTC = n
	case "syslog_priority":
		o.syslogPriority = n
	case "names_log_priority":
		o.namesLogPriority = n
	case "use_watchdog":
		o.useWatchdog = n
	case "io_timeout":
		if n > 0 {
			o.ioTimeout = n
		}
	case "watchdog_fire_timeout":
		if n > 0 {
			o.watchdogFireTmo = n
		}
	case "kill_grace_seconds":
		if n >= 0 && n <= 60 {
			o.killGraceSeconds = n
		}
	case "high_priority":
		o.highPriority = n
	case "mlock_level":
		o.mlockLevel = n
	case "sh_retries":
		o.shRetries = n
	case "uname":
		o.uname = val
	case "gname":
		o.gname = val
	case "our_host_name":
		o.ourHostName = truncName(val)
	case "renewal_read_extend_sec":
		o.renewalReadExtend = n
		o.renewalReadExtSet = true
	case "write_init_io_timeout":
		if n > 0 {
			o.writeInitIOTimeout = n
		}
	case "renewal_history_size":
		o.renewalHistorySize = n
	case "paxos_debug_all":
		o.paxosDebugAll = n
	case "debug_io":
		o.debugIOSubmit = strings.Contains(val, "submit")
		o.debugIOComplete = strings.Contains(val, "complete")
	case "debug_clients":
		o.debugClients = n
	case "debug_cmd":
		applyDebugCmd(val, o)
	case "max_sectors_kb":
		o.maxSectorsKB = val
	case "max_worker_threads":
		o.maxWorkerThreads = n
		if o.maxWorkerThreads < 2 {
			o.maxWorkerThreads = 2
		}
	}
}

func applyDebugCmd(val string, o *options) {
	if len(val) < 2 {
		return
	}
	on := val[0] == '+'
	if !on && val[0] != '-' {
		return
	}
	name := val[1:]
	if name == "all" {
		if on {
			o.debugCmds = ^uint64(0)
		} else {
			o.debugCmds = 0
		}
		return
	}
	bit, ok := debugCmdBits[name]
	if !ok {
		return
	}
	if on {
		o.debugCmds |= 1 << bit
	} else {
		o.debugCmds &^= 1 << bit
	}
}
