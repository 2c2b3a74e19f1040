package cli

import (
	"bufio"
	"io"

	"github.com/spf13/cobra"

	"github.com/gosanlock/gosanlock/client"
)

// ClientOptions is what one "sanlock client" action runs with: the scanned
// command line and config file, the streams and the daemon connection.
type ClientOptions struct {
	Action string
	Out    *bufio.Writer
	ErrOut io.Writer
	Dial   func() (*client.Client, error)
	Exec   func(path string, argv, env []string) error
	// OutTTY says stdout is a terminal: "client command" then shows its
	// lines as they come, and otherwise leaves them in the buffer that
	// exec discards, as sanlock 3.8.5's stdio does (docs/compat.md).
	OutTTY bool

	opts *options
}

// clientAction is one action of "sanlock client" (docs/cli.md "Client
// actions").
type clientAction struct {
	// use is the name and the options as "sanlock help" shows them.
	use   string
	short string
	// listed: "sanlock help" shows the action (3.8.5 leaves some out).
	listed bool
	// run prints the text output and returns the exit status.
	run func(*clientRun) int
	// json prints the --json object and returns the exit status; nil
	// when the action has no --json (docs/json.md).
	json func(*clientRun) int
}

// withRV adapts an action that returns its result code: the exit status
// is 0 for 0, else 1.
func withRV(f func(*clientRun) int) func(*clientRun) int {
	return func(c *clientRun) int { return exitStatus(f(c)) }
}

// clientActionList is every client action, those of the help text first in
// its order.
var clientActionList = []clientAction{
	{use: "status [-D] [-o p|s]", short: "list the daemon, its clients, lockspaces and leases",
		listed: true, run: (*clientRun).status, json: (*clientRun).statusJSON},
	{use: "gets [-h 0|1]", short: "list the lockspaces (with -h 1 their hosts)",
		listed: true, run: (*clientRun).gets, json: (*clientRun).getsJSON},
	{use: "host_status -s LOCKSPACE [-D]", short: "show the hosts the daemon sees in a lockspace",
		listed: true, run: (*clientRun).hostStatus, json: (*clientRun).hostStatusJSON},
	{use: "renewal -s LOCKSPACE", short: "show the recent renewals of a lockspace",
		listed: true, run: (*clientRun).renewal, json: (*clientRun).renewalJSON},
	{use: "set_event -s LOCKSPACE -i <host_id> [-g gen] -e <event> -d <data>", short: "send an event to a host",
		listed: true, run: withRV((*clientRun).setEvent)},
	{use: "set_config -s LOCKSPACE [-u 0|1] [-O 0|1]", short: "change a lockspace setting",
		listed: true, run: withRV((*clientRun).setConfig)},
	{use: "log_dump", short: "print the daemon's in-memory log",
		listed: true, run: (*clientRun).logDump},
	{use: "shutdown [-f 0|1] [-w 0|1]", short: "stop the daemon",
		listed: true, run: withRV((*clientRun).shutdown)},
	{use: "init -s LOCKSPACE | -r RESOURCE [-z 0|1] [-Z 512|4096 -A 1M|2M|4M|8M]", short: "initialize a lockspace or resource lease through the daemon",
		listed: true, run: withRV((*clientRun).init)},
	{use: "read -s LOCKSPACE | -r RESOURCE [-D]", short: "read a lockspace or resource lease through the daemon",
		listed: true, run: withRV((*clientRun).read)},
	{use: "add_lockspace -s LOCKSPACE", short: "join a lockspace",
		listed: true, run: withRV((*clientRun).addLockspace)},
	{use: "inq_lockspace -s LOCKSPACE", short: "ask whether the daemon is in a lockspace",
		listed: true, run: withRV((*clientRun).inqLockspace)},
	{use: "rem_lockspace -s LOCKSPACE", short: "leave a lockspace",
		listed: true, run: withRV((*clientRun).remLockspace)},
	{use: "command -r RESOURCE -c <path> <args>", short: "acquire leases, then run a program that holds them",
		listed: true, run: (*clientRun).command},
	{use: "acquire -r RESOURCE -p <pid>", short: "acquire leases for a process",
		listed: true, run: withRV((*clientRun).acquire)},
	{use: "convert -r RESOURCE -p <pid>", short: "change a held lease between shared and exclusive",
		listed: true, run: withRV((*clientRun).convert)},
	{use: "release -r RESOURCE -p <pid>", short: "release leases of a process",
		listed: true, run: withRV((*clientRun).release)},
	{use: "inquire -p <pid>", short: "list the leases a process holds",
		listed: true, run: withRV((*clientRun).inquire), json: (*clientRun).inquireJSON},
	{use: "request -r RESOURCE -f <force_mode>", short: "ask the holder of a lease to give it up",
		listed: true, run: withRV((*clientRun).request)},
	{use: "examine -r RESOURCE | -s LOCKSPACE", short: "look for requests on a lease or lockspace",
		listed: true, run: withRV((*clientRun).examine)},
	{use: "format -x RINDEX [-Z 512|4096 -A 1M|2M|4M|8M]", short: "initialize a resource index",
		listed: true, run: withRV(rindexAction("format"))},
	{use: "create -x RINDEX -e <resource_name>", short: "create a resource lease in an index",
		listed: true, run: withRV(rindexAction("create"))},
	{use: "delete -x RINDEX -e <resource_name>[:<offset>]", short: "delete a resource lease from an index",
		listed: true, run: withRV(rindexAction("delete"))},
	{use: "lookup -x RINDEX [-e <resource_name>:<offset>]", short: "find a resource in an index",
		listed: true, run: withRV(rindexAction("lookup"))},
	{use: "update -x RINDEX -e <resource_name>[:<offset>] [-z 0|1]", short: "add or remove an index entry",
		listed: true, run: withRV(rindexAction("update"))},
	{use: "rebuild -x RINDEX", short: "rebuild an index from its resource leases",
		listed: true, run: withRV(rindexAction("rebuild"))},

	{use: "write -s LOCKSPACE | -r RESOURCE [-z 0|1] [-Z 512|4096 -A 1M|2M|4M|8M]", short: "the same as init",
		run: withRV((*clientRun).init)},
	{use: "align -s LOCKSPACE", short: "print the align size of a lockspace's disk",
		run: withRV((*clientRun).align)},
	{use: "version", short: "print the client and daemon versions",
		run: func(c *clientRun) int { c.version(); return 0 }},
	{use: "reexec [-e PATH]", short: "hand the daemon over to a new binary without dropping a lease (docs/upgrade.md)",
		run: withRV((*clientRun).reexec)}, // reexec.go
	{use: "locks [-s LOCKSPACE] [-r RESOURCE]", short: "show who holds what (--json: one object)",
		run: (*clientRun).locks, json: (*clientRun).locks}, // docs/json.md
}

// clientActions are the actions of "sanlock client" (and of the implicit
// client mode, "sanlock <action>"); jsonActions those that take --json.
var clientActions, jsonActions = func() (all, js map[string]bool) {
	all, js = map[string]bool{}, map[string]bool{}
	for _, a := range clientActionList {
		all[a.name()] = true
		if a.json != nil {
			js[a.name()] = true
		}
	}
	return all, js
}()

func (a clientAction) name() string { return firstWord(a.use) }

// clientActionNamed is the client action called name.
func clientActionNamed(name string) (clientAction, bool) { return actionNamed(clientActionList, name) }

// NewCmdClient is "sanlock client <action>": one subcommand per action.
// Without an action, or with an unknown one, it fails as sanlock does.
func NewCmdClient(f *Factory) *cobra.Command {
	cmd := newModeCmd(f, "client", "client <action> [options]")
	for _, a := range clientActionList {
		cmd.AddCommand(NewCmdClientAction(f, a, nil))
	}
	return cmd
}

// NewCmdClientAction is one client action. Its arguments keep sanlock's
// syntax (single-letter options, each with a separate value, in any
// order), which cobra's flags cannot express, so the command scans them
// itself into ClientOptions. runF, when not nil, receives the options
// instead of running the action (tests).
func NewCmdClientAction(f *Factory, a clientAction, runF func(*ClientOptions) error) *cobra.Command {
	return newOptionsCmd(f, "client", a.name(), a.use, a.short, func(o *options) error {
		opts := &ClientOptions{Action: a.name(), Out: f.Out, ErrOut: f.ErrOut, Dial: f.Dial, Exec: f.Exec, OutTTY: f.OutTTY, opts: o}
		if runF != nil {
			return runF(opts)
		}
		return exitWith(runClient(opts, a))
	})
}

// runClient runs a client action and returns the exit status.
func runClient(opts *ClientOptions, a clientAction) int {
	c := &clientRun{o: opts.opts, env: opts, out: opts.Out, stderr: opts.ErrOut}
	c.cl, c.err = opts.Dial()
	if c.o.json {
		return a.json(c)
	}
	return a.run(c)
}
