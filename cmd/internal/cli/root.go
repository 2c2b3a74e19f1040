package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// The command tree (docs/cli.md "Command tree"):
//
//	sanlock [-h|--help|-V|--version]
//	sanlock daemon [options]
//	sanlock client <action> [options]    one subcommand per client action
//	sanlock <action> [options]           the same, hidden: client is the default
//	sanlock direct <action> [options]    one subcommand per direct action
//	sanlock help | version | completion bash|zsh|fish
//
// cobra finds the command; the options of daemon and of every action keep
// sanlock's own syntax, so those commands take their arguments unparsed
// and scan them in one place (Factory.scan, options.go). Each command then
// turns the scan into its own options struct (NewCmdStatus and
// StatusOptions, NewCmdDirectInit and DirectInitOptions, NewCmdDaemon and
// DaemonOptions: client_options.go, direct_options.go, daemon_mode.go).
// "sanlock help" prints the usage text built from the action tables
// (help.go).

// NewCmdRoot builds the whole tree.
func NewCmdRoot(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "sanlock <command> <action> ...",
		Short: "lease manager for hosts sharing storage",
		// Only -h, --help, -V and --version mean something here; any other
		// first word is an unknown client action.
		RunE: func(_ *cobra.Command, args []string) error {
			args = dropPin(args)
			if len(args) == 0 {
				return f.usage(0)
			}
			switch args[0] {
			case "-h", "--help":
				return f.usage(0)
			case "-V", "--version":
				fmt.Fprintf(f.Out, "%s %s (built %s)\n", f.Argv0, Version, f.BuildDate)
				return nil
			}
			return f.unknownAction("client", args)
		},
		ValidArgsFunction: completeRoot,
	}
	ownSyntax(root)
	// Every way cobra would show help shows sanlock's usage.
	root.SetHelpFunc(func(*cobra.Command, []string) { _ = f.usage(0) })
	root.SetHelpCommand(NewCmdHelp(f))
	root.CompletionOptions.DisableDefaultCmd = true // ours: NewCmdCompletion
	client := NewCmdClient(f)
	root.AddCommand(NewCmdDaemon(f, nil), client, NewCmdDirect(f), NewCmdVersion(f), NewCmdCompletion(f, root))
	// The implicit client mode: each client action is also a hidden
	// command of the root, unless a command word takes its name
	// ("sanlock version" is not "sanlock client version").
	for _, a := range clientActionList {
		if subcommand(root, a.name()) != nil {
			continue
		}
		cmd := newClientActionCmd(f, a.name())
		cmd.Hidden = true
		root.AddCommand(cmd)
	}
	return root
}

// NewCmdVersion is "sanlock version": the version, whatever follows.
func NewCmdVersion(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version",
		Short: commandShort("version"),
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintln(f.Out, Version)
			return nil
		},
	}
	ownSyntax(cmd)
	return cmd
}

// NewCmdHelp is "sanlock help": the whole usage, whatever follows (as
// 3.8.5, which has no help per command).
func NewCmdHelp(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "help",
		Short: commandShort("help"),
		RunE:  func(*cobra.Command, []string) error { return f.usage(0) },
	}
	ownSyntax(cmd)
	return cmd
}

// usage prints the usage text and ends with status.
func (f *Factory) usage(status int) error {
	io.WriteString(f.Out, usageText)
	return exitWith(status)
}

// unknownAction is a parent command run without a known action word:
// usage and status 1 without one, else the unknown word.
func (f *Factory) unknownAction(mode string, args []string) error {
	if len(args) == 0 {
		return f.usage(1)
	}
	fmt.Fprintf(f.Out, "%s action %q is unknown\n", mode, args[0])
	return exitError(1)
}

// newOptionsCmd is a command whose options keep sanlock's syntax: it
// scans its arguments for mode and action (Factory.scan, which prints any
// option error) and hands the scan to run, which builds the command's own
// options from it; completion offers the options of its usage line.
func newOptionsCmd(f *Factory, mode, action, use, short string, run func(*options) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		RunE: func(_ *cobra.Command, args []string) error {
			o, err := f.scan(mode, action, args)
			if err != nil {
				return err
			}
			return run(o)
		},
		ValidArgsFunction: func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return completeOptions(f, mode, action, args, toComplete)
		},
	}
	ownSyntax(cmd)
	return cmd
}

// ownSyntax marks a command whose arguments cobra must pass on unparsed:
// sanlock's options are single letters each with a separate value, in any
// order, with meanings that depend on the action ("-h 1" is not help).
func ownSyntax(cmd *cobra.Command) {
	cmd.Args = cobra.ArbitraryArgs
	cmd.DisableFlagParsing = true
	cmd.SilenceErrors = true
	cmd.SilenceUsage = true
}

// newModeCmd is "sanlock client" or "sanlock direct": cobra finds its
// actions (added by the caller) by word; run itself, it got no action word
// or one it does not know, and fails as sanlock does.
func newModeCmd(f *Factory, mode, use string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: commandShort(mode),
		RunE: func(_ *cobra.Command, args []string) error {
			return f.unknownAction(mode, dropPin(args))
		},
	}
	ownSyntax(cmd)
	return cmd
}

// pin is the "--" that pinCommandWords inserts; dropPin removes it.
const pin = "--"

// pinCommandWords keeps sanlock's rule that the command and action words
// come first. cobra looks for a subcommand word past anything that looks
// like an option and its value ("sanlock -x client status" would find
// status), so where a word is expected and the argument starts with '-',
// a "--" is inserted: cobra stops there and the parent command, which
// drops it (dropPin), gets the argument.
func pinCommandWords(root *cobra.Command, args []string) []string {
	cmd := root
	for i, a := range args {
		if strings.HasPrefix(a, "-") {
			out := append(append(append(make([]string, 0, len(args)+1), args[:i]...), pin), args[i:]...)
			return out
		}
		next := subcommand(cmd, a)
		if next == nil || !next.HasSubCommands() {
			break
		}
		cmd = next
	}
	if args == nil {
		return []string{} // cobra reads os.Args for nil
	}
	return args
}

// dropPin removes the "--" that pinCommandWords put first. Arguments never
// start with "--" otherwise: a first "--" of the user's own is pinned too.
func dropPin(args []string) []string {
	if len(args) > 0 && args[0] == pin {
		return args[1:]
	}
	return args
}

// subcommand is the command named name under cmd, or nil.
func subcommand(cmd *cobra.Command, name string) *cobra.Command {
	for _, c := range cmd.Commands() {
		if c.Name() == name {
			return c
		}
	}
	return nil
}

// actionNamed is the action called name in list.
func actionNamed[A interface{ name() string }](list []A, name string) (A, bool) {
	for _, a := range list {
		if a.name() == name {
			return a, true
		}
	}
	var none A
	return none, false
}

// firstWord is the command name in a usage line.
func firstWord(use string) string {
	name, _, _ := strings.Cut(use, " ")
	return name
}
