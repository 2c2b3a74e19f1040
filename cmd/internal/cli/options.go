package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/daemon"
	"github.com/gosanlock/gosanlock/daemon/config"
	"github.com/gosanlock/gosanlock/diskfmt"
)

// maxResourceArgs is how many -r options the tool keeps.
const maxResourceArgs = 8

// options is the scanner's result: everything the config file and the
// command line set, for any mode and action. The meaning of several
// letters depends on the mode and action (docs/cli.md "Options"); the
// scanner stores the raw value where the meaning differs. No action reads
// it: each command turns it into its own options struct (the build
// function of NewCmdStatus, NewCmdDirectInit, ...; NewCmdDaemon keeps cfg).
type options struct {
	debug bool // -D
	json  bool // --json (client status-like actions only; a gosanlock addition)

	// cfg holds the daemon settings and the io_timeout; the config file
	// and the daemon options are applied to it by the daemon package, the
	// one place that knows what each setting means.
	cfg *daemon.Config

	ioTimeoutArg int  // the last -o value as given (atoi), 0 if none
	sortArg      byte // -o p|s for client status

	// per-request values
	generation uint64 // -g (client set_event, direct acquire)
	getHosts   int    // -h (client gets/read)
	wait       int    // -w (client shutdown)
	all        int    // -a (client release: all leases)
	eventStr   string // -e raw
	numHosts   int    // -n
	maxHosts   int    // -m
	pid        int    // -p
	hostID     uint64 // -i
	data       uint64 // -d
	force      uint32 // -f
	clear      bool   // -z
	sector     int    // -Z
	align      int    // -A (bytes; 0 = not given)
	orphan     int    // -O
	orphanSet  bool
	persistent int // -P
	used       int // -u
	usedSet    bool
	file       string // -F
	// -C: a client index (ci= of status -D) for acquire, convert,
	// release and inquire (3.9.5+), 0|1 (CAW) for init and init_host.
	clientID    int
	clientIDSet bool
	nodelay     int    // -N (add_lockspace: NODELAY; init_host: NO_TIMEOUT)
	timestamp   uint64 // -t of init_host

	lockspace    client.Lockspace
	lockspaceSet bool
	resources    []client.Resource
	rindex       client.RIndex
	rindexSet    bool
	command      string   // -c
	commandArgs  []string // after -c's value
	// spawns are the programs of "client spawn", one per -c COUNT: the
	// COUNT words after it (the program and its arguments).
	spawns [][]string

	pathArg    string // direct dump / next_free
	pathArgSet bool

	// acquireWait is our extension --wait DURATION of client acquire
	// and client command (0 = not given: one attempt, as sanlock 3.8.5).
	acquireWait time.Duration

	// badResources are the stderr lines for the -r values that were not
	// kept (not parsed, or over the 8 the tool keeps). client command and
	// client spawn refuse to run a program when there is any.
	badResources []string
}

// rentryActions are the client actions whose -e is a resource
// name[:offset] (parseRentry).
var rentryActions = map[string]bool{"create": true, "delete": true, "lookup": true, "update": true}

// refusedError is a command line the tool refuses to act on although
// sanlock would run it (a name it would cut to 48 bytes): its lines go
// to stderr and the tool exits 1.
type refusedError struct{ lines []string }

func (e *refusedError) Error() string { return strings.Join(e.lines, "\n") }

func defaultOptions() *options {
	return &options{cfg: config.DefaultConfig(), pid: -1}
}

// usageError is an option error: its lines are printed and the tool exits 1.
type usageError struct{ lines []string }

func (e *usageError) Error() string { return strings.Join(e.lines, "\n") }

func usageErr(lines ...string) error { return &usageError{lines: lines} }

// scanOptions processes args (everything after the command and action
// words) the way sanlock does: every option is exactly "-X", -D takes no
// value, every other option takes the next argument, -c ends scanning.
// Messages that sanlock prints while scanning but that do not stop it (bad
// resource strings, too many -r) go to out. mode and action select
// mode-specific meanings ("client", "direct", "daemon").
func scanOptions(o *options, mode, action string, args []string, out io.Writer) error {
	i := 0
	if mode == "direct" && (action == "dump" || action == "next_free") {
		if len(args) == 0 {
			return usageErr()
		}
		o.pathArg = args[0]
		o.pathArgSet = true
		i = 1
	}
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--json" && mode == "client" && jsonActions[action] {
			o.json = true
			continue
		}
		if a == "--wait" && mode == "client" && (action == "acquire" || action == "command") {
			// Our extension; sanlock's scanner has no long options, so
			// this cannot change the meaning of a 3.8.5 command line.
			if i+1 >= len(args) {
				return usageErr("option '--wait' requires arg")
			}
			i++
			d, err := parseWait(args[i])
			if err != nil {
				return usageErr(err.Error())
			}
			o.acquireWait = d
			continue
		}
		if len(a) != 2 || a[0] != '-' {
			return usageErr("unknown option "+a, "space required before option value")
		}
		c := a[1]
		if c == 'D' {
			o.debug = true
			o.cfg.Debug = true
			continue
		}
		if i+1 >= len(args) {
			return usageErr(fmt.Sprintf("option '%c' requires arg", c))
		}
		i++
		v := args[i]
		switch c {
		case 'Q', 'R', 'H', 'L', 'S', 'U', 'G', 'l', 'b':
			_ = o.cfg.ApplyOption(c, v)
		case 't':
			_ = o.cfg.ApplyOption(c, v)
			o.timestamp, _ = strtoull(v, 0)
		case 'C':
			o.clientID, o.clientIDSet = atoi(v), true
		case 'N':
			o.nodelay = atoi(v)
		case 'g':
			if mode == "daemon" {
				_ = o.cfg.ApplyOption(c, v)
			} else {
				o.generation, _ = strtoull(v, 0)
			}
		case 'o':
			if mode == "client" && action == "status" {
				o.sortArg = 0
				if v != "" {
					o.sortArg = v[0]
				}
			} else {
				o.ioTimeoutArg = atoi(v)
				_ = o.cfg.ApplyOption(c, v)
			}
		case 'w':
			_ = o.cfg.ApplyOption(c, v)
			o.wait = atoi(v)
		case 'h':
			if mode == "client" && (action == "gets" || action == "read" || action == "command" || action == "spawn") {
				o.getHosts = atoi(v)
			} else {
				_ = o.cfg.ApplyOption(c, v)
			}
		case 'e':
			if mode == "client" && rentryActions[action] {
				if name, _, _ := strings.Cut(v, ":"); len(name) > diskfmt.NameLen {
					return &refusedError{[]string{nameTooLong("resource", name)}}
				}
			}
			o.eventStr = v
			if mode == "daemon" {
				_ = o.cfg.ApplyOption(c, v)
			}
		case 'a':
			_ = o.cfg.ApplyOption(c, v)
			o.all = atoi(v)
		case 'n':
			o.numHosts = atoi(v)
		case 'm':
			o.maxHosts = atoi(v)
		case 'p':
			o.pid = atoi(v)
		case 'i':
			o.hostID, _ = strtoull(v, 0)
		case 'd':
			o.data, _ = strtoull(v, 0)
		case 'f':
			f, _ := strtoull(v, 0)
			o.force = uint32(f)
		case 's':
			if name := client.SplitUnescaped(v, 3)[0]; len(name) > diskfmt.NameLen && mode != "daemon" {
				return &refusedError{[]string{nameTooLong("lockspace", name)}}
			}
			o.lockspace = *client.ParseLockspace(v)
			o.lockspaceSet = true
		case 'r':
			if len(o.resources) >= maxResourceArgs {
				fmt.Fprintln(out, "resource args over max 8")
				o.badResources = append(o.badResources,
					fmt.Sprintf("sanlock: -r %s: not used: at most %d -r options are kept", v, maxResourceArgs))
				continue
			}
			r, err := client.ParseResource(v)
			if err != nil {
				fmt.Fprintf(out, "resource arg parse error %d\n\n", client.ErrorCode(err))
				o.badResources = append(o.badResources, fmt.Sprintf("sanlock: -r %s: %s", v, resourceProblem(v)))
				continue
			}
			o.resources = append(o.resources, *r)
		case 'x':
			if name := client.SplitUnescaped(v, 2)[0]; len(name) > diskfmt.NameLen {
				return &refusedError{[]string{nameTooLong("lockspace", name)}}
			}
			o.rindex = *client.ParseRIndex(v)
			o.rindexSet = true
		case 'z':
			o.clear = true
		case 'Z':
			o.sector = atoi(v)
		case 'A':
			switch v {
			case "1M":
				o.align = diskfmt.Align1M
			case "2M":
				o.align = diskfmt.Align2M
			case "4M":
				o.align = diskfmt.Align4M
			case "8M":
				o.align = diskfmt.Align8M
			}
		case 'O':
			o.orphan = atoi(v)
			o.orphanSet = true
		case 'P':
			o.persistent = atoi(v)
		case 'u':
			o.used = atoi(v)
			o.usedSet = true
		case 'F':
			o.file = v
		case 'X', 'M':
			if mode != "daemon" {
				return usageErr(fmt.Sprintf("unknown option: %c", c))
			}
			_ = o.cfg.ApplyOption(c, v) // strict_peer, metrics_address (ours)
		case 'c':
			if mode == "client" && action == "spawn" {
				// -c COUNT: the next COUNT words are one program and
				// its arguments; scanning goes on after them.
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 {
					return usageErr("spawn -c COUNT must be a positive number: " + v)
				}
				if n > len(args)-1-i {
					return usageErr("spawn -c COUNT past the end of arguments")
				}
				o.spawns = append(o.spawns, append([]string(nil), args[i+1:i+1+n]...))
				i += n
				continue
			}
			o.command = v
			o.commandArgs = append([]string(nil), args[i+1:]...)
			i = len(args)
		default:
			return usageErr(fmt.Sprintf("unknown option: %c", c))
		}
	}
	if o.align != 0 {
		if _, ok := diskfmt.LookupGeometry(o.sector, o.align); !ok {
			return usageErr(
				fmt.Sprintf("Invalid sector_size/align_size combination (%d/%d)", o.sector, o.align),
				"Use one of: 512/1M, 4096/1M, 4096/2M, 4096/4M, 4096/8M.")
		}
	}
	return nil
}

// parseWait parses the --wait value: a Go duration ("30s", "2m") or a
// number of seconds.
func parseWait(v string) (time.Duration, error) {
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("invalid --wait duration %q (use e.g. 30s, 2m or a number of seconds)", v)
	}
	return d, nil
}

// leaseIOTimeout is the io_timeout that direct init -s records in the
// lockspace. Like sanlock 3.8.5, a non-zero -o is stored as given (a
// negative value wraps to 16 bits); otherwise the config/default value.
func (o *options) leaseIOTimeout() uint16 {
	if o.ioTimeoutArg != 0 {
		return uint16(o.ioTimeoutArg)
	}
	return uint16(o.cfg.IOTimeout)
}

// sizeFlags turns -Z/-A into request flag bits: a sector flag only for 512
// or 4096, an align flag only when -A named a size.
func (o *options) sizeFlags() uint32 {
	var f uint32
	switch o.sector {
	case diskfmt.SectorSize512:
		f |= diskfmt.FlagSector512
	case diskfmt.SectorSize4K:
		f |= diskfmt.FlagSector4K
	}
	switch o.align {
	case diskfmt.Align1M:
		f |= diskfmt.FlagAlign1M
	case diskfmt.Align2M:
		f |= diskfmt.FlagAlign2M
	case diskfmt.Align4M:
		f |= diskfmt.FlagAlign4M
	case diskfmt.Align8M:
		f |= diskfmt.FlagAlign8M
	}
	return f
}
