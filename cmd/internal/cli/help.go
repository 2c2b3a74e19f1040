package cli

import (
	"fmt"
	"strings"
)

// usageText is what "sanlock help" prints: the commands, then the options
// of daemon, of every listed client action and of every listed direct
// action, taken from the command tables (clientActionList,
// directActionList), so help, completion and the commands cannot drift
// apart. It matches the Debian 3.8.5 binary byte for byte, plus the daemon
// "-o" line of the newer upstream snapshot (docs/cli.md "Help text").
var usageText = buildUsage()

// commandHelp is the commands section of the usage, in its order; the
// cobra commands take their short help from it.
var commandHelp = []struct{ name, short string }{
	{"daemon", "start daemon"},
	{"client", "send request to daemon (default type if none given)"},
	{"direct", "access storage directly (no coordination with daemon)"},
	{"help", "print this usage (defaults in parens)"},
	{"version", "print version"},
}

// commandShort is the short help of a command word.
func commandShort(name string) string {
	for _, c := range commandHelp {
		if c.name == name {
			return c.short
		}
	}
	return ""
}

// daemonOptionsHelp lists the options of "sanlock daemon".
const daemonOptionsHelp = "" +
	"  -D            no fork and print all logging to stderr\n" +
	"  -Q 0|1        quiet error messages for common lock contention (1)\n" +
	"  -R 0|1        renewal debugging, log debug info about renewals (0)\n" +
	"  -H <num>      renewal history size (180)\n" +
	"  -L <pri>      write logging at priority level and up to logfile (4 LOG_WARNING)\n" +
	"                (use -1 for none)\n" +
	"  -S <pri>      write logging at priority level and up to syslog (3 LOG_ERR)\n" +
	"                (use -1 for none)\n" +
	"  -U <uid>      user id\n" +
	"  -G <gid>      group id\n" +
	"  -t <num>      max worker threads (8)\n" +
	"  -g <sec>      seconds for graceful recovery (40)\n" +
	"  -o <sec>      io timeout (10)\n" +
	"  -w 0|1        use watchdog through wdmd (1)\n" +
	"  -h 0|1        use high priority (RR) scheduling (0)\n" +
	"  -l <num>      use mlockall (0 none, 1 current, 2 current and future) (1)\n" +
	"  -b <sec>      seconds a host id bit will remain set in delta lease bitmap\n" +
	"                (default: 6 * io_timeout)\n" +
	"  -e <str>      local host name used in delta leases, max len 48\n" +
	"                (default: product_uuid or randomly generated uuid)\n"

// stringsHelp explains the LOCKSPACE, RESOURCE and RINDEX strings and the
// limits.
const stringsHelp = "" +
	"LOCKSPACE = <lockspace_name>:<host_id>:<path>:<offset>\n" +
	"  <lockspace_name>\tname of lockspace\n" +
	"  <host_id>\t\tlocal host identifier in lockspace\n" +
	"  <path>\t\tpath to storage reserved for leases\n" +
	"  <offset>\t\toffset on path (bytes)\n" +
	"\n" +
	"RESOURCE = <lockspace_name>:<resource_name>:<path>:<offset>[:<lver>]\n" +
	"  <lockspace_name>\tname of lockspace\n" +
	"  <resource_name>\tname of resource\n" +
	"  <path>\t\tpath to storage reserved for leases\n" +
	"  <offset>\t\toffset on path (bytes)\n" +
	"  <lver>                optional leader version or SH for shared lease\n" +
	"\n" +
	"RINDEX = <lockspace_name>:<path>:<offset>\n" +
	"  <lockspace_name>\tname of lockspace\n" +
	"  <path>\t\tpath to storage reserved for leases\n" +
	"  <offset>\t\toffset on path (bytes)\n" +
	"\n" +
	"Limits:\n" +
	"valid sector/align size combinations: 512/1M, 4K/1M, 4K/2M, 4K/4M, 4K/8M\n" +
	"maximum host_id for sector/align sizes: 2000, 250, 500, 1000, 2000\n" +
	"maximum name length for lockspaces and resources: 48\n" +
	"maximum path length: 1024\n" +
	"maximum client process connections: 1000\n" +
	"\n"

func buildUsage() string {
	var b strings.Builder
	b.WriteString("Usage:\nsanlock <command> <action> ...\n\ncommands:\n")
	for _, c := range commandHelp {
		fmt.Fprintf(&b, "  %-13s %s\n", c.name, c.short)
	}
	b.WriteString("\nsanlock daemon [options]\n" + daemonOptionsHelp + "\n")
	b.WriteString("sanlock client <action> [options]\n")
	for _, a := range clientActionList {
		if a.listed {
			b.WriteString("sanlock client " + a.use + "\n")
		}
	}
	b.WriteString("\nsanlock direct " + directCommon + "\n")
	for _, a := range directActionList {
		if a.listed {
			b.WriteString("sanlock direct " + a.use + "\n")
		}
	}
	b.WriteString("\n" + stringsHelp)
	return b.String()
}
