package cli

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// Shell completion: "sanlock completion bash|zsh|fish" prints a script
// (a gosanlock addition; the word "completion" was an unknown client
// action in 3.8.5). The scripts ask "sanlock __complete ..." for
// candidates, which come from the tables the parser uses (clientActions,
// directActions) and from the usage text, so they follow the code.

// completionShells are the shells "sanlock completion" knows.
var completionShells = []string{"bash", "zsh", "fish"}

// NewCmdCompletion is "sanlock completion bash|zsh|fish" for the tree of
// root.
func NewCmdCompletion(f *Factory, root *cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:       "completion bash|zsh|fish",
		Short:     "print a shell completion script",
		ValidArgs: completionShells,
		RunE: func(_ *cobra.Command, args []string) error {
			return exitWith(completionScript(f, root, args))
		},
	}
	ownSyntax(cmd)
	return cmd
}

func completionScript(f *Factory, root *cobra.Command, args []string) int {
	if len(args) != 1 {
		fmt.Fprintf(f.Out, "usage: %s completion bash|zsh|fish\n", f.Argv0)
		return 1
	}
	var err error
	switch args[0] {
	case "bash":
		err = root.GenBashCompletionV2(f.Out, true)
	case "zsh":
		err = root.GenZshCompletion(f.Out)
	case "fish":
		err = root.GenFishCompletion(f.Out, true)
	default:
		fmt.Fprintf(f.Out, "unknown shell %q: use bash, zsh or fish\n", args[0])
		return 1
	}
	if err != nil {
		fmt.Fprintln(f.Out, err)
		return 1
	}
	return 0
}

// sortedKeys returns the keys of a set in order.
func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// commandWords are the first words other than client actions.
var commandWords = []string{"daemon", "client", "direct", "help", "version", "completion"}

// completeRoot completes "sanlock <TAB>": cobra offers the commands, this
// the client actions (client is the default command; their hidden
// commands complete their options).
func completeRoot(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, a := range clientActionList {
		if !slices.Contains(commandWords, a.name()) {
			out = append(out, cobra.CompletionWithDesc(a.name(), a.short))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeOptions offers the options the usage text shows for mode and
// action, or the values of the option just typed when the usage lists them
// ("-w 0|1"); other values complete as file names (paths in LOCKSPACE and
// RESOURCE strings start with one).
func completeOptions(mode, action string, done []string) ([]string, cobra.ShellCompDirective) {
	opts := usageOptions(mode, action)
	if n := len(done); n > 0 && len(done[n-1]) == 2 && done[n-1][0] == '-' && done[n-1] != "-D" {
		if vals := opts[done[n-1]]; len(vals) > 0 {
			return vals, cobra.ShellCompDirectiveNoFileComp
		}
		return nil, cobra.ShellCompDirectiveDefault
	}
	out := make([]string, 0, len(opts))
	for o := range opts {
		if !slices.Contains(done, o) || o == "-r" {
			out = append(out, o)
		}
	}
	slices.Sort(out)
	return out, cobra.ShellCompDirectiveNoFileComp
}

var (
	usageOptRE    = regexp.MustCompile(`-([A-Za-z])(?: ([^\s\]|]+(?:\|[^\s\]|]+)*))?`)
	usageChoiceRE = regexp.MustCompile(`^[0-9A-Za-z]+(\|[0-9A-Za-z]+)+$`)
)

// usageOptions reads the options of one mode and action from the usage
// lines of the command tables (clientActionList, directActionList; for
// direct also the options every action takes) or from the option lines
// of daemon. Each maps to its listed values ("0|1" -> 0, 1).
func usageOptions(mode, action string) map[string][]string {
	opts := map[string][]string{}
	add := func(text string) {
		for _, m := range usageOptRE.FindAllStringSubmatch(text, -1) {
			o := "-" + m[1]
			if _, ok := opts[o]; !ok {
				opts[o] = nil
			}
			if usageChoiceRE.MatchString(m[2]) {
				for _, v := range strings.Split(m[2], "|") {
					if !slices.Contains(opts[o], v) {
						opts[o] = append(opts[o], v)
					}
				}
			}
		}
	}
	switch mode {
	case "daemon":
		for _, l := range strings.Split(daemonOptionsHelp, "\n") {
			if fs := strings.Fields(l); len(fs) > 1 && strings.HasPrefix(l, "  -") {
				add(fs[0] + " " + fs[1])
			}
		}
	case "client":
		if a, ok := clientActionNamed(action); ok {
			add(strings.TrimPrefix(a.use, action))
		}
	case "direct":
		if a, ok := directActionNamed(action); ok {
			add(strings.TrimPrefix(a.use, action))
		}
		add(strings.TrimPrefix(directCommon, "<action>"))
	}
	return opts
}
