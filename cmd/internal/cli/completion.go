package cli

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gosanlock/gosanlock/client"
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
func completeRoot(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, a := range clientActionList {
		if !slices.Contains(commandWords, a.name()) && strings.HasPrefix(a.name(), toComplete) {
			out = append(out, cobra.CompletionWithDesc(a.name(), a.short))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// longOptions are the long options of the scanner (our additions); an
// action takes those that scanOptions accepts for it, so that completion
// follows the scanner. Each has its example arguments.
var longOptions = []struct {
	name string
	args []string
}{
	{"--json", nil},
	{"--wait", []string{"1"}},
}

// actionLongOptions are the long options scanOptions accepts for mode and
// action, with the number of values each takes.
func actionLongOptions(mode, action string) map[string]int {
	out := map[string]int{}
	for _, lo := range longOptions {
		var args []string
		if pathFirst(mode, action) {
			args = append(args, "x")
		}
		args = append(append(args, lo.name), lo.args...)
		if scanOptions(defaultOptions(), mode, action, args, io.Discard) == nil {
			out[lo.name] = len(lo.args)
		}
	}
	return out
}

// pathFirst: the action's first argument is a path (direct dump, next_free).
func pathFirst(mode, action string) bool {
	return mode == "direct" && (action == "dump" || action == "next_free")
}

// completionState is where the word being completed stands, from the
// words before it (done), scanned as scanOptions scans them.
type completionState struct {
	used map[string]bool // the options already given
	// valueOf is the option whose value the word is ("" when the word is
	// an option).
	valueOf string
	// free: the word is a path or a program's argument (dump's path, the
	// program of command -c and its arguments, spawn's programs).
	free bool
}

func scanCompletion(mode, action string, done []string) completionState {
	st := completionState{used: map[string]bool{}}
	longs := actionLongOptions(mode, action)
	i := 0
	if pathFirst(mode, action) {
		if len(done) == 0 {
			st.free = true
			return st
		}
		i = 1
	}
	for ; i < len(done); i++ {
		a := done[i]
		st.used[a] = true
		n, long := longs[a]
		switch {
		case a == "-D" || (long && n == 0):
			continue
		case i+1 == len(done):
			st.valueOf = a
			return st
		case a == "-c" && mode == "client" && action == "spawn":
			// -c COUNT: the next COUNT words are a program and its arguments.
			count, _ := strconv.Atoi(done[i+1])
			if i+1+count >= len(done) {
				st.free = true
				return st
			}
			i += 1 + count
		case a == "-c" && mode == "client":
			st.free = true // -c PATH ARGS: the rest is the program's
			return st
		default:
			i++
		}
	}
	return st
}

// completeOptions offers, for mode and action, the options the usage text
// shows and the long options the action takes; after an option, the
// values its usage lists ("-w 0|1"), the lockspaces of a running daemon
// for -s and -r of client actions (lockspaceCompletions), else file names
// (paths in LOCKSPACE and RESOURCE strings start with one). The path of
// direct dump and next_free and the program of client command -c and its
// arguments complete as file names.
func completeOptions(f *Factory, mode, action string, done []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	st := scanCompletion(mode, action, done)
	if st.free {
		return nil, cobra.ShellCompDirectiveDefault
	}
	opts := usageOptions(mode, action)
	if st.valueOf != "" {
		if st.valueOf == "-c" && action == "spawn" {
			return nil, cobra.ShellCompDirectiveNoFileComp // COUNT
		}
		if vals := opts[st.valueOf]; len(vals) > 0 {
			return vals, cobra.ShellCompDirectiveNoFileComp
		}
		if mode == "client" {
			if c, d, ok := lockspaceCompletions(f, action, st.valueOf, toComplete); ok {
				return c, d
			}
		}
		if strings.HasPrefix(st.valueOf, "--") {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return nil, cobra.ShellCompDirectiveDefault
	}
	var out []cobra.Completion
	for o := range opts {
		if !st.used[o] || o == "-r" || (o == "-c" && action == "spawn") {
			out = append(out, o)
		}
	}
	for o := range actionLongOptions(mode, action) {
		if !st.used[o] {
			out = append(out, o)
		}
	}
	out = slices.DeleteFunc(out, func(o string) bool { return !strings.HasPrefix(o, toComplete) })
	slices.Sort(out)
	return out, cobra.ShellCompDirectiveNoFileComp
}

// lockspaceNameActions take -s as a lockspace name only; lockspaceActions
// take the whole LOCKSPACE string of a lockspace the daemon is in. The
// others (add_lockspace, init, write, init_host) name a lockspace the
// daemon usually is not in: their -s completes as a file name.
var (
	lockspaceNameActions = []string{"host_status", "renewal", "set_host", "set_event", "set_config", "locks"}
	lockspaceActions     = []string{"inq_lockspace", "rem_lockspace", "read", "align", "examine"}
)

// completionTimeout bounds the question to the daemon.
const completionTimeout = time.Second

// lockspaceCompletions completes the value of -s or -r of a client action
// from the lockspaces of the running daemon (GET_LOCKSPACES, as `client
// gets`): a name, a whole LOCKSPACE string, or the "NAME:" a RESOURCE
// starts with. ok is false when the option takes none of these, or for a
// RESOURCE whose lockspace is typed or that the daemon has none for (it
// then completes as a file name). For -s, without a daemon, it quietly
// offers nothing.
func lockspaceCompletions(f *Factory, action, opt, toComplete string) (c []cobra.Completion, d cobra.ShellCompDirective, ok bool) {
	var format func(client.Lockspace) string
	d = cobra.ShellCompDirectiveNoFileComp
	switch {
	case opt == "-s" && slices.Contains(lockspaceNameActions, action):
		format = func(ls client.Lockspace) string { return ls.Name }
	case opt == "-s" && slices.Contains(lockspaceActions, action):
		format = func(ls client.Lockspace) string {
			return fmt.Sprintf("%s:%d:%s:%d", ls.Name, ls.HostID, ls.Disk.Path, ls.Disk.Offset)
		}
	case opt == "-r" && !strings.Contains(toComplete, ":"):
		format = func(ls client.Lockspace) string { return ls.Name + ":" }
		d |= cobra.ShellCompDirectiveNoSpace
	default:
		return nil, 0, false
	}
	for _, ls := range daemonLockspaces(f) {
		if s := format(ls); strings.HasPrefix(s, toComplete) && !slices.Contains(c, s) {
			c = append(c, s)
		}
	}
	if len(c) == 0 && opt == "-r" {
		return nil, 0, false // a new RESOURCE: its path completes as a file name
	}
	return c, d, true
}

// daemonLockspaces asks the daemon for its lockspaces; nil when none runs
// or it does not answer within completionTimeout.
func daemonLockspaces(f *Factory) []client.Lockspace {
	if f == nil || f.Dial == nil {
		return nil
	}
	cl, err := f.Dial()
	if err != nil {
		return nil
	}
	cl.Timeout = completionTimeout
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	spaces, _ := cl.GetLockspaces(ctx)
	return spaces
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
