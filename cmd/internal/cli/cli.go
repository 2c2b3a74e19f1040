// Package cli implements the sanlock command line: argument scanning with
// sanlock's own rules, the config file, the LOCKSPACE/RESOURCE/RINDEX
// string syntax, and the direct (storage) actions. Every message goes to
// stdout with the texts and exit codes of the sanlock 3.8.5 tool.
package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
)

// Version is the sanlock version this tool is compatible with.
const Version = "3.8.5"

// buildDate may be set at link time (-X) to the C __DATE__ __TIME__ form,
// e.g. "Jan  3 2023 13:34:49". When empty, the VCS time or the executable's
// modification time is used.
var buildDate string

// EnvConfigFile names another config file than /etc/sanlock/sanlock.conf
// (a gosanlock addition: several daemons with different settings on one
// machine, as tests and the demo run them).
const EnvConfigFile = "SANLOCK_CONFIG_FILE"

// clientActions are the actions of "sanlock client" (and of the implicit
// client mode, "sanlock <action>").
var clientActions = map[string]bool{
	"status": true, "host_status": true, "gets": true, "renewal": true,
	"set_event": true, "set_config": true, "log_dump": true, "shutdown": true,
	"init": true, "write": true, "read": true, "add_lockspace": true,
	"inq_lockspace": true, "rem_lockspace": true, "command": true,
	"acquire": true, "convert": true, "release": true, "inquire": true,
	"request": true, "examine": true, "align": true, "version": true,
	"format": true, "create": true, "delete": true, "lookup": true,
	"update": true, "rebuild": true,
	"locks": true, // gosanlock addition (docs/json.md)
}

// directActions are the actions of "sanlock direct".
var directActions = map[string]bool{
	"init": true, "read_leader": true, "write_leader": true, "dump": true,
	"next_free": true, "acquire": true, "release": true, "acquire_id": true,
	"release_id": true, "renew_id": true, "format": true, "rebuild": true,
	"lookup": true, "update": true,
}

// Invocation is what a mode implementation receives: the scanned options
// and the factory (streams and outside world).
type Invocation struct {
	opts *options
	f    *Factory
}

// Main runs the sanlock command line with args (args[0] is the program
// name) and returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	argv0 := "sanlock"
	if len(args) > 0 {
		argv0, args = args[0], args[1:]
	}
	f := NewFactory(argv0, stdout, stderr)
	defer f.Out.Flush()
	return f.Main(args)
}

// Main runs the command line args (without the program name) and returns
// the exit status. Everything is written to f.Out, which the caller flushes.
func (f *Factory) Main(args []string) int {
	out := f.Out
	stderr := f.ErrOut
	m := &mainRun{f: f, argv0: f.Argv0, out: out, stderr: stderr}
	root := m.command()
	if args == nil {
		args = []string{} // cobra reads os.Args for nil
	}
	root.SetArgs(args)
	root.SetOut(out)
	root.SetErr(stderr)
	if err := root.Execute(); err != nil {
		fmt.Fprintln(out, err)
		return 1
	}
	return m.status
}

type mainRun struct {
	f      *Factory
	argv0  string
	out    *bufio.Writer
	stderr io.Writer
	status int
}

// command builds the cobra tree. Flag parsing is off everywhere: sanlock's
// own scanner (scanOptions) decides what an argument means.
func (m *mainRun) command() *cobra.Command {
	mk := func(use string, run func(args []string) int) *cobra.Command {
		return &cobra.Command{
			Use:                use,
			Args:               cobra.ArbitraryArgs,
			DisableFlagParsing: true,
			SilenceErrors:      true,
			SilenceUsage:       true,
			Run:                func(_ *cobra.Command, args []string) { m.status = run(args) },
		}
	}
	root := mk("sanlock", m.runRoot)
	// Cobra's own completion command is replaced by ours (completion.go).
	root.CompletionOptions.DisableDefaultCmd = true
	root.ValidArgsFunction = completeRoot
	// Our own help command replaces cobra's generated one.
	root.SetHelpCommand(mk("help", func([]string) int { return m.usage(0) }))
	daemonCmd := mk("daemon", m.runDaemonMode)
	daemonCmd.ValidArgsFunction = completeDaemon
	clientCmd := mk("client", func(args []string) int {
		if len(args) == 0 {
			return m.usage(1)
		}
		return m.runClientMode(args[0], args[1:])
	})
	clientCmd.ValidArgsFunction = completeMode("client", clientActions)
	directCmd := mk("direct", func(args []string) int {
		if len(args) == 0 {
			return m.usage(1)
		}
		return m.runDirectMode(args[0], args[1:])
	})
	directCmd.ValidArgsFunction = completeMode("direct", directActions)
	root.AddCommand(
		mk("version", func([]string) int { fmt.Fprintln(m.out, Version); return 0 }),
		daemonCmd, clientCmd, directCmd,
		m.completionCommand(root),
	)
	return root
}

// runRoot handles everything that is not a known command word.
func (m *mainRun) runRoot(args []string) int {
	if len(args) == 0 {
		return m.usage(0)
	}
	switch args[0] {
	case "help", "-h", "--help":
		return m.usage(0)
	case "version":
		fmt.Fprintln(m.out, Version)
		return 0
	case "-V", "--version":
		fmt.Fprintf(m.out, "%s %s (built %s)\n", m.argv0, Version, m.f.BuildDate)
		return 0
	case "daemon":
		return m.runDaemonMode(args[1:])
	case "client", "direct":
		if len(args) < 2 {
			return m.usage(1)
		}
		if args[0] == "client" {
			return m.runClientMode(args[1], args[2:])
		}
		return m.runDirectMode(args[1], args[2:])
	}
	return m.runClientMode(args[0], args[1:])
}

func (m *mainRun) usage(status int) int {
	io.WriteString(m.out, usageText)
	return status
}

// setup reads the config file and scans the options; on an option error
// it prints the messages and reports false.
func (m *mainRun) setup(mode, action string, args []string) (*options, bool) {
	o := defaultOptions()
	path := m.f.ConfigPath
	if p := os.Getenv(EnvConfigFile); p != "" {
		path = p
	}
	readConfig(path, o)
	// What scanning prints goes to stdout, except with --json, where
	// stdout carries nothing but the JSON object.
	var msgs bytes.Buffer
	err := scanOptions(o, mode, action, args, &msgs)
	var dest io.Writer = m.out
	if o.json {
		dest = m.stderr
	}
	dest.Write(msgs.Bytes())
	if err != nil {
		var ue *usageError
		if errors.As(err, &ue) {
			for _, l := range ue.lines {
				fmt.Fprintln(dest, l)
			}
		}
		return nil, false
	}
	return o, true
}

func (m *mainRun) runDaemonMode(args []string) int {
	o, ok := m.setup("daemon", "", args)
	if !ok {
		return 1
	}
	return daemonMain(&Invocation{opts: o, f: m.f})
}

func (m *mainRun) runClientMode(action string, args []string) int {
	if !clientActions[action] {
		fmt.Fprintf(m.out, "client action %q is unknown\n", action)
		return 1
	}
	o, ok := m.setup("client", action, args)
	if !ok {
		return 1
	}
	return runClientAction(action, &Invocation{opts: o, f: m.f})
}

func (m *mainRun) runDirectMode(action string, args []string) int {
	if !directActions[action] {
		fmt.Fprintf(m.out, "direct action %q is unknown\n", action)
		return 1
	}
	o, ok := m.setup("direct", action, args)
	if !ok {
		return 1
	}
	d := &direct{o: o, f: m.f, out: m.out}
	return exitStatus(d.run(action))
}

// exitStatus is the process status for a result: 0 only for 0.
func exitStatus(rv int) int {
	if rv == 0 {
		return 0
	}
	return 1
}

// builtString renders the build time like C's __DATE__ " " __TIME__.
func builtString(buildDate string) string {
	if buildDate != "" {
		return buildDate
	}
	const layout = "Jan _2 2006 15:04:05"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.time" {
				if t, err := time.Parse(time.RFC3339, s.Value); err == nil {
					return t.Local().Format(layout)
				}
			}
		}
	}
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			if st, err := os.Stat(exe); err == nil {
				return st.ModTime().Format(layout)
			}
		}
	}
	return time.Now().Format(layout)
}
