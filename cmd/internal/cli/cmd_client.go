package cli

import (
	"github.com/spf13/cobra"
)

// clientAction is one action of "sanlock client" (docs/cli.md "Client
// actions").
type clientAction struct {
	// use is the name and the options as "sanlock help" shows them.
	use   string
	short string
	// listed: "sanlock help" shows the action (3.8.5 leaves some out).
	listed bool
	// json: the action takes --json (docs/json.md).
	json bool
}

// clientActionList is every client action, those of the help text first in
// its order.
var clientActionList = []clientAction{
	{use: "status [-D] [-o p|s]", short: "list the daemon, its clients, lockspaces and leases",
		listed: true, json: true},
	{use: "gets [-h 0|1]", short: "list the lockspaces (with -h 1 their hosts)",
		listed: true, json: true},
	{use: "host_status -s LOCKSPACE [-D]", short: "show the hosts the daemon sees in a lockspace",
		listed: true, json: true},
	{use: "renewal -s LOCKSPACE", short: "show the recent renewals of a lockspace",
		listed: true, json: true},
	{use: "set_host -s LOCKSPACE -i <host_id> [-g gen] -F <flag_name>", short: "mark a host's lease (DEAD_EXT: dead, after fencing)"},
	{use: "set_event -s LOCKSPACE -i <host_id> [-g gen] -e <event> -d <data>", short: "send an event to a host",
		listed: true},
	{use: "set_config -s LOCKSPACE [-u 0|1] [-O 0|1]", short: "change a lockspace setting",
		listed: true},
	{use: "log_dump", short: "print the daemon's in-memory log",
		listed: true},
	{use: "shutdown [-f 0|1] [-w 0|1]", short: "stop the daemon",
		listed: true},
	{use: "init -s LOCKSPACE | -r RESOURCE [-z 0|1] [-Z 512|4096 -A 1M|2M|4M|8M]", short: "initialize a lockspace or resource lease through the daemon",
		listed: true},
	{use: "read -s LOCKSPACE | -r RESOURCE [-D]", short: "read a lockspace or resource lease through the daemon",
		listed: true},
	{use: "init_host -s LOCKSPACE [-g <generation>] [-t <timestamp>] [-N 1] [-e <name>] [-Z 512|4096 -A 1M|2M|4M|8M] [-C 0|1]", short: "write one host's delta lease through the daemon (5.x)"},
	{use: "add_lockspace -s LOCKSPACE", short: "join a lockspace (-N 1: without the wait that detects another host using the host_id; unsafe)",
		listed: true},
	{use: "inq_lockspace -s LOCKSPACE", short: "ask whether the daemon is in a lockspace",
		listed: true},
	{use: "rem_lockspace -s LOCKSPACE", short: "leave a lockspace",
		listed: true},
	{use: "command -r RESOURCE -c <path> <args>", short: "acquire leases, then run a program that holds them (-h 1: with acquire2, printing the owner of a lease held elsewhere)",
		listed: true},
	{use: "spawn -r RESOURCE [-h 0|1] [-O 0|1] [-P 0|1] [-d 0|1] -c COUNT CMD [ARG...] [-c COUNT CMD [ARG...]]", short: "acquire leases, run programs one after another as children while holding them, then release (5.x)"},
	{use: "acquire -r RESOURCE -p <pid>", short: "acquire leases for a process (-C <client_id>: for the client of that index)",
		listed: true},
	{use: "convert -r RESOURCE -p <pid>", short: "change a held lease between shared and exclusive (-C <client_id> as for acquire)",
		listed: true},
	{use: "release -r RESOURCE -p <pid>", short: "release leases of a process (-C <client_id> as for acquire)",
		listed: true},
	{use: "inquire -p <pid>", short: "list the leases a process holds (-C <client_id> as for acquire)",
		listed: true, json: true},
	{use: "request -r RESOURCE -f <force_mode>", short: "ask the holder of a lease to give it up",
		listed: true},
	{use: "examine -r RESOURCE | -s LOCKSPACE", short: "look for requests on a lease or lockspace",
		listed: true},
	{use: "format -x RINDEX [-Z 512|4096 -A 1M|2M|4M|8M]", short: "initialize a resource index",
		listed: true},
	{use: "create -x RINDEX -e <resource_name>", short: "create a resource lease in an index",
		listed: true},
	{use: "delete -x RINDEX -e <resource_name>[:<offset>]", short: "delete a resource lease from an index",
		listed: true},
	{use: "lookup -x RINDEX [-e <resource_name>:<offset>]", short: "find a resource in an index",
		listed: true},
	{use: "update -x RINDEX -e <resource_name>[:<offset>] [-z 0|1]", short: "add or remove an index entry",
		listed: true},
	{use: "rebuild -x RINDEX", short: "rebuild an index from its resource leases",
		listed: true},

	{use: "write -s LOCKSPACE | -r RESOURCE [-z 0|1] [-Z 512|4096 -A 1M|2M|4M|8M]", short: "the same as init"},
	{use: "align -s LOCKSPACE", short: "print the align size of a lockspace's disk"},
	{use: "version", short: "print the client and daemon versions"},
	{use: "reexec", short: "hand the daemon over to a new image of its own binary without dropping a lease (docs/upgrade.md)"}, // reexec.go
	{use: "locks [-s LOCKSPACE] [-r RESOURCE]", short: "show who holds what (--json: one object)",
		json: true}, // docs/json.md
}

// clientActions are the actions of "sanlock client" (and of the implicit
// client mode, "sanlock <action>"); jsonActions those that take --json.
var clientActions, jsonActions = func() (all, js map[string]bool) {
	all, js = map[string]bool{}, map[string]bool{}
	for _, a := range clientActionList {
		all[a.name()] = true
		if a.json {
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
		cmd.AddCommand(newClientActionCmd(f, a.name()))
	}
	return cmd
}
