package cli

// usageText is what "sanlock help" prints. It matches the Debian 3.8.5
// binary byte for byte, plus the daemon "-o" line of the newer upstream
// snapshot (docs/cli.md "Help text").
const usageText = "" +
	"Usage:\n" +
	"sanlock <command> <action> ...\n" +
	"\n" +
	"commands:\n" +
	"  daemon        start daemon\n" +
	"  client        send request to daemon (default type if none given)\n" +
	"  direct        access storage directly (no coordination with daemon)\n" +
	"  help          print this usage (defaults in parens)\n" +
	"  version       print version\n" +
	"\n" +
	"sanlock daemon [options]\n" +
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
	"  -e <str>      local host name used in delta leases\n" +
	"                (default: generate new uuid)\n" +
	"\n" +
	"sanlock client <action> [options]\n" +
	"sanlock client status [-D] [-o p|s]\n" +
	"sanlock client gets [-h 0|1]\n" +
	"sanlock client host_status -s LOCKSPACE [-D]\n" +
	"sanlock client renewal -s LOCKSPACE\n" +
	"sanlock client set_event -s LOCKSPACE -i <host_id> [-g gen] -e <event> -d <data>\n" +
	"sanlock client set_config -s LOCKSPACE [-u 0|1] [-O 0|1]\n" +
	"sanlock client log_dump\n" +
	"sanlock client shutdown [-f 0|1] [-w 0|1]\n" +
	"sanlock client init -s LOCKSPACE | -r RESOURCE [-z 0|1] [-Z 512|4096 -A 1M|2M|4M|8M]\n" +
	"sanlock client read -s LOCKSPACE | -r RESOURCE [-D]\n" +
	"sanlock client add_lockspace -s LOCKSPACE\n" +
	"sanlock client inq_lockspace -s LOCKSPACE\n" +
	"sanlock client rem_lockspace -s LOCKSPACE\n" +
	"sanlock client command -r RESOURCE -c <path> <args>\n" +
	"sanlock client acquire -r RESOURCE -p <pid>\n" +
	"sanlock client convert -r RESOURCE -p <pid>\n" +
	"sanlock client release -r RESOURCE -p <pid>\n" +
	"sanlock client inquire -p <pid>\n" +
	"sanlock client request -r RESOURCE -f <force_mode>\n" +
	"sanlock client examine -r RESOURCE | -s LOCKSPACE\n" +
	"sanlock client format -x RINDEX [-Z 512|4096 -A 1M|2M|4M|8M]\n" +
	"sanlock client create -x RINDEX -e <resource_name>\n" +
	"sanlock client delete -x RINDEX -e <resource_name>[:<offset>]\n" +
	"sanlock client lookup -x RINDEX [-e <resource_name>:<offset>]\n" +
	"sanlock client update -x RINDEX -e <resource_name>[:<offset>] [-z 0|1]\n" +
	"sanlock client rebuild -x RINDEX\n" +
	"\n" +
	"sanlock direct <action> [-a 0|1] [-o 0|1] [-Z 512|4096 -A 1M|2M|4M|8M]\n" +
	"sanlock direct init -s LOCKSPACE | -r RESOURCE [-Z 512|4096 -A 1M|2M|4M|8M]\n" +
	"sanlock direct read_leader -s LOCKSPACE | -r RESOURCE\n" +
	"sanlock direct dump <path>[:<offset>[:<size>]]\n" +
	"sanlock direct format -x RINDEX [-Z 512|4096 -A 1M|2M|4M|8M]\n" +
	"sanlock direct lookup -x RINDEX [-e <resource_name>:<offset>]\n" +
	"sanlock direct update -x RINDEX -e <resource_name>[:<offset>] [-z 0|1]\n" +
	"sanlock direct rebuild -x RINDEX\n" +
	"\n" +
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
