package cli

import (
	"github.com/spf13/cobra"
)

// directAction is one action of "sanlock direct" (docs/cli.md "Direct
// actions").
type directAction struct {
	// use is the name and the options as "sanlock help" shows them.
	use   string
	short string
	// listed: "sanlock help" shows the action (3.8.5 leaves some out).
	listed bool
}

// directCommon is what "sanlock help" lists for every direct action.
const directCommon = "<action> [-a 0|1] [-o 0|1] [-Z 512|4096 -A 1M|2M|4M|8M]"

// directActionList is every direct action, those of the help text first in
// its order.
var directActionList = []directAction{
	{use: "init -s LOCKSPACE | -r RESOURCE [-Z 512|4096 -A 1M|2M|4M|8M]", short: "initialize a lockspace or resource lease",
		listed: true},
	{use: "read_leader -s LOCKSPACE | -r RESOURCE", short: "print the leader record of a lease",
		listed: true},
	{use: "dump <path>[:<offset>[:<size>]]", short: "print the leases found on storage",
		listed: true},
	{use: "format -x RINDEX [-Z 512|4096 -A 1M|2M|4M|8M]", short: "initialize a resource index",
		listed: true},
	{use: "lookup -x RINDEX [-e <resource_name>:<offset>]", short: "find a resource in an index",
		listed: true},
	{use: "update -x RINDEX -e <resource_name>[:<offset>] [-z 0|1]", short: "add or remove an index entry",
		listed: true},
	{use: "rebuild -x RINDEX", short: "rebuild an index from its resource leases",
		listed: true},

	{use: "write_leader -s LOCKSPACE | -r RESOURCE [-F <file>] [-f 0|1]", short: "write a leader record (fields from -F)"},
	{use: "next_free <path>[:<offset>]", short: "print the offset of the first free lease area"},
	{use: "acquire -r RESOURCE -i <host_id> -g <generation>", short: "run one paxos ballot for a resource lease"},
	{use: "release -r RESOURCE", short: "free a resource lease written by host_id 0"},
	{use: "init_host -s LOCKSPACE [-g <generation>] [-t <timestamp>] [-N 1] [-e <name>] [-Z 512|4096 -A 1M|2M|4M|8M] [-C 0|1]", short: "write one host's delta lease (5.x)"},
	{use: "acquire_id -s LOCKSPACE [-e <host_name>]", short: "acquire a host_id lease (left to expire)"},
	{use: "release_id -s LOCKSPACE", short: "free a host_id lease"},
	{use: "renew_id -s LOCKSPACE", short: "renew a host_id lease once"},
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
		cmd.AddCommand(newDirectActionCmd(f, a.name()))
	}
	return cmd
}
