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

// completionCommand builds the "completion" command.
func (m *mainRun) completionCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:                "completion",
		Args:               cobra.ArbitraryArgs,
		DisableFlagParsing: true,
		SilenceErrors:      true,
		SilenceUsage:       true,
		ValidArgs:          completionShells,
		Run: func(_ *cobra.Command, args []string) {
			m.status = m.completion(root, args)
		},
	}
}

func (m *mainRun) completion(root *cobra.Command, args []string) int {
	if len(args) != 1 {
		fmt.Fprintf(m.out, "usage: %s completion bash|zsh|fish\n", m.argv0)
		return 1
	}
	var err error
	switch args[0] {
	case "bash":
		err = root.GenBashCompletionV2(m.out, true)
	case "zsh":
		err = root.GenZshCompletion(m.out)
	case "fish":
		err = root.GenFishCompletion(m.out, true)
	default:
		fmt.Fprintf(m.out, "unknown shell %q: use bash, zsh or fish\n", args[0])
		return 1
	}
	if err != nil {
		fmt.Fprintln(m.out, err)
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

// completeRoot completes "sanlock <TAB>": the commands, then the client
// actions (client is the default command).
func completeRoot(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) == 0 {
		return append(append([]string(nil), commandWords...), sortedKeys(clientActions)...), cobra.ShellCompDirectiveNoFileComp
	}
	return completeOptions("client", args[0], args[1:])
}

// completeMode returns the completion function of "sanlock client|direct".
func completeMode(mode string, actions map[string]bool) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) == 0 {
			return sortedKeys(actions), cobra.ShellCompDirectiveNoFileComp
		}
		return completeOptions(mode, args[0], args[1:])
	}
}

func completeDaemon(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	return completeOptions("daemon", "", args)
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

// usageOptions reads the options of one mode and action from usageText:
// the "sanlock <mode> <action> ..." lines (and the "<action>" line that
// applies to every direct action), or the option lines under
// "sanlock daemon". Each maps to its listed values ("0|1" -> 0, 1).
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
	inDaemon := false
	for _, l := range strings.Split(usageText, "\n") {
		switch {
		case mode == "daemon":
			if strings.HasPrefix(l, "sanlock daemon") {
				inDaemon = true
				continue
			}
			if inDaemon && l == "" {
				return opts
			}
			if inDaemon && strings.HasPrefix(l, "  -") {
				add(strings.Fields(l)[0] + " " + strings.Join(strings.Fields(l)[1:2], ""))
			}
		case strings.HasPrefix(l, "sanlock "+mode+" "+action+" "):
			add(strings.TrimPrefix(l, "sanlock "+mode+" "+action))
		case mode == "direct" && strings.HasPrefix(l, "sanlock direct <action> "):
			add(strings.TrimPrefix(l, "sanlock direct <action>"))
		}
	}
	return opts
}
