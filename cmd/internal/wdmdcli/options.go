package wdmdcli

import (
	"fmt"
	"io"
	"strings"

	"github.com/gosanlock/gosanlock/internal/cnum"
)

// Version is the wdmd version we print. The usage text is that of wdmd
// 3.9.5 and 5.1.1 (which list -t and -F); the version stays 3.8.5's, like
// the sanlock daemon's.
const Version = "3.8.5"

const usage = `Usage:
wdmd [options]

--version, -V          print version
--help, -h             print usage
--dump, -d             print debug from daemon
--probe, -p            print path of functional watchdog device
--trytimeout, -t <sec> set the timeout value for watchdog device
--forcefire, -F        force watchdog to fire and reset machine, use with -t
-D                     debug: no fork and print all logging to stderr
-H 0|1                 use high priority features (1 yes, 0 no, default 0)
-G <name>              group ownership for the socket
-S 0|1                 allow script tests (default 0)
-s <path>              path to scripts dir (default /etc/wdmd.d)
-k <num>               kill unfinished scripts after num seconds (default 0)
-w <path>              path to the watchdog device to try first
`

// options are wdmd's settings. The hidden ones exist for tests only and
// are not in the help text.
type options struct {
	probe         bool
	foreground    bool   // -D
	highPriority  int    // -H
	group         string // -G
	allowScripts  int    // -S
	scriptDir     string // -s
	killScriptSec int    // -k
	device        string // -w
	tryTimeout    int    // -t, --trytimeout
	tryGiven      bool
	forceFire     bool // -F, --forcefire

	// hidden, for tests
	runDir       string // --run-dir: socket and pid file (default /run/wdmd)
	marker       string // --shm-marker: crash marker file (default /dev/shm/wdmd)
	testDevice   string // --test-device: socket of a testdev.Bank instead of /dev/watchdog*
	testInterval int    // --test-interval: seconds between tests (default 10)
	gridOnly     bool   // --grid-only: tests only on the interval grid, like 3.8.5
	trace        bool   // --trace-records: log every received record (with -D)
}

func defaultOptions() *options {
	return &options{
		group:     "sanlock",
		scriptDir: "/etc/wdmd.d",
		runDir:    "/run/wdmd",
		marker:    "/dev/shm/wdmd",
	}
}

// action is what the command line asks for once it is scanned.
type action int

const (
	actDaemon action = iota
	actHelp
	actVersion
	actDump
)

// parse scans args (without argv[0]) like getopt_long with wdmd's option
// string: short options may be clustered and take their argument attached
// or as the next word; --help, --version and --dump act at once, so later
// options are not looked at; unknown options and missing arguments print
// getopt's message on stderr and are otherwise ignored; words that are
// not options are ignored.
func parse(argv0 string, args []string, stderr io.Writer) (*options, action) {
	o := defaultOptions()
	withArg := map[byte]bool{'H': true, 'G': true, 'S': true, 's': true, 'k': true, 'w': true, 't': true}
	setShort := func(c byte, v string) {
		switch c {
		case 'H':
			o.highPriority = cnum.Atoi(v)
		case 'G':
			o.group = v
		case 'S':
			o.allowScripts = cnum.Atoi(v)
		case 's':
			o.scriptDir = v
		case 'k':
			o.killScriptSec = cnum.Atoi(v)
		case 't':
			o.tryTimeout = cnum.Atoi(v)
			o.tryGiven = true
		case 'w':
			if len(v) > 63 {
				v = v[:63]
			}
			o.device = v
		}
	}
	hidden := map[string]func(string){
		"run-dir":       func(v string) { o.runDir = v },
		"shm-marker":    func(v string) { o.marker = v },
		"test-device":   func(v string) { o.testDevice = v },
		"test-interval": func(v string) { o.testInterval = cnum.Atoi(v) },
		"trytimeout":    func(v string) { setShort('t', v) },
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return o, actDaemon
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a[2:], "=")
			switch name {
			case "help":
				return o, actHelp
			case "version":
				return o, actVersion
			case "dump":
				return o, actDump
			case "probe":
				o.probe = true
				continue
			case "forcefire":
				o.forceFire = true
				continue
			case "grid-only":
				o.gridOnly = true
				continue
			case "trace-records":
				o.trace = true
				continue
			}
			set, ok := hidden[name]
			if !ok {
				fmt.Fprintf(stderr, "%s: unrecognized option '%s'\n", argv0, a)
				continue
			}
			if !hasVal {
				if i+1 >= len(args) {
					fmt.Fprintf(stderr, "%s: option '--%s' requires an argument\n", argv0, name)
					continue
				}
				i++
				val = args[i]
			}
			set(val)
		case strings.HasPrefix(a, "-") && len(a) > 1:
			for j := 1; j < len(a); j++ {
				c := a[j]
				switch {
				case c == 'h':
					return o, actHelp
				case c == 'V':
					return o, actVersion
				case c == 'd':
					return o, actDump
				case c == 'p':
					o.probe = true
				case c == 'D':
					o.foreground = true
				case c == 'F':
					o.forceFire = true
				case withArg[c]:
					v := a[j+1:]
					if v == "" {
						if i+1 >= len(args) {
							fmt.Fprintf(stderr, "%s: option requires an argument -- '%c'\n", argv0, c)
							break
						}
						i++
						v = args[i]
					}
					setShort(c, v)
					j = len(a)
				default:
					fmt.Fprintf(stderr, "%s: invalid option -- '%c'\n", argv0, c)
				}
			}
		}
	}
	return o, actDaemon
}
