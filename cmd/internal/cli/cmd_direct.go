package cli

import (
	"bufio"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gosanlock/gosanlock/clock"
	"github.com/gosanlock/gosanlock/diskfmt"
)

// DirectOptions is what one "sanlock direct" action runs with: the scanned
// command line and config file, stdout, and the storage and clocks it
// reaches.
type DirectOptions struct {
	Action           string
	Out              *bufio.Writer
	OpenDevice       func(path string) (diskfmt.Device, error)
	Clock            func() clock.Clock
	MonotonicSeconds func() uint64

	opts *options
}

// directAction is one action of "sanlock direct" (docs/cli.md "Direct
// actions").
type directAction struct {
	// use is the name and the options as "sanlock help" shows them.
	use   string
	short string
	// listed: "sanlock help" shows the action (3.8.5 leaves some out).
	listed bool
	// run prints the output and returns the result code.
	run func(*direct) int
}

// directCommon is what "sanlock help" lists for every direct action.
const directCommon = "<action> [-a 0|1] [-o 0|1] [-Z 512|4096 -A 1M|2M|4M|8M]"

// printDone prints "<label> done <rv>" after f.
func printDone(label string, f func(*direct) int) func(*direct) int {
	return func(d *direct) int {
		rv := f(d)
		fmt.Fprintf(d.out, "%s done %d\n", label, rv)
		return rv
	}
}

// directActionList is every direct action, those of the help text first in
// its order.
var directActionList = []directAction{
	{use: "init -s LOCKSPACE | -r RESOURCE [-Z 512|4096 -A 1M|2M|4M|8M]", short: "initialize a lockspace or resource lease",
		listed: true, run: printDone("init", (*direct).init)},
	{use: "read_leader -s LOCKSPACE | -r RESOURCE", short: "print the leader record of a lease",
		listed: true, run: (*direct).readLeader},
	{use: "dump <path>[:<offset>[:<size>]]", short: "print the leases found on storage",
		listed: true, run: (*direct).dump},
	{use: "format -x RINDEX [-Z 512|4096 -A 1M|2M|4M|8M]", short: "initialize a resource index",
		listed: true, run: printDone("format", (*direct).format)},
	{use: "lookup -x RINDEX [-e <resource_name>:<offset>]", short: "find a resource in an index",
		listed: true, run: (*direct).lookup},
	{use: "update -x RINDEX -e <resource_name>[:<offset>] [-z 0|1]", short: "add or remove an index entry",
		listed: true, run: printDone("update", (*direct).update)},
	{use: "rebuild -x RINDEX", short: "rebuild an index from its resource leases",
		listed: true, run: printDone("rebuild", (*direct).rebuild)},

	{use: "write_leader -s LOCKSPACE | -r RESOURCE [-F <file>] [-f 0|1]", short: "write a leader record (fields from -F)",
		run: (*direct).writeLeader},
	{use: "next_free <path>[:<offset>]", short: "print the offset of the first free lease area",
		run: (*direct).nextFree},
	{use: "acquire -r RESOURCE -i <host_id> -g <generation>", short: "run one paxos ballot for a resource lease",
		run: printDone("acquire", (*direct).acquire)},
	{use: "release -r RESOURCE", short: "free a resource lease written by host_id 0",
		run: printDone("release", (*direct).release)},
	{use: "acquire_id -s LOCKSPACE [-e <host_name>]", short: "acquire a host_id lease (left to expire)",
		run: printDone("acquire_id", (*direct).acquireID)},
	{use: "release_id -s LOCKSPACE", short: "free a host_id lease",
		run: printDone("release_id", (*direct).releaseID)},
	{use: "renew_id -s LOCKSPACE", short: "renew a host_id lease once",
		run: printDone("rewew_id", (*direct).renewID)}, // sic, as sanlock prints it
}

// directActions are the actions of "sanlock direct".
var directActions = func() map[string]bool {
	m := map[string]bool{}
	for _, a := range directActionList {
		m[a.name()] = true
	}
	return m
}()

func (a directAction) name() string { return firstWord(a.use) }

// directActionNamed is the direct action called name.
func directActionNamed(name string) (directAction, bool) { return actionNamed(directActionList, name) }

// NewCmdDirect is "sanlock direct <action>": one subcommand per action.
// Without an action, or with an unknown one, it fails as sanlock does.
func NewCmdDirect(f *Factory) *cobra.Command {
	cmd := newModeCmd(f, "direct", "direct "+directCommon)
	for _, a := range directActionList {
		cmd.AddCommand(NewCmdDirectAction(f, a, nil))
	}
	return cmd
}

// NewCmdDirectAction is one direct action, scanning sanlock's option syntax
// into DirectOptions itself (see NewCmdClientAction). runF, when not nil,
// receives the options instead of running the action (tests).
func NewCmdDirectAction(f *Factory, a directAction, runF func(*DirectOptions) error) *cobra.Command {
	return newOptionsCmd(f, "direct", a.name(), a.use, a.short, func(o *options) error {
		opts := &DirectOptions{Action: a.name(), Out: f.Out, OpenDevice: f.OpenDevice, Clock: f.Clock,
			MonotonicSeconds: f.MonotonicSeconds, opts: o}
		if runF != nil {
			return runF(opts)
		}
		return exitWith(runDirect(opts, a))
	})
}

// runDirect runs a direct action and returns the exit status.
func runDirect(opts *DirectOptions, a directAction) int {
	return exitStatus(a.run(&direct{o: opts.opts, env: opts, out: opts.Out}))
}
