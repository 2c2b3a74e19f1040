// Package cli implements the sanlock command line: the cobra command tree
// (root.go, cmd_client.go, cmd_direct.go, daemon_mode.go), argument
// scanning with sanlock's own rules in one place (options.go), one command
// with its own options struct per action (client_options.go,
// direct_options.go), the config file, the LOCKSPACE/RESOURCE/RINDEX string
// syntax, the client actions and the direct (storage) actions. Commands
// reach streams, daemon, storage, clocks and exec only through a Factory.
// Every message goes to stdout with the texts and exit codes of the
// sanlock 3.8.5 tool (docs/cli.md).
package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"
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
// This is the one place where a command's error becomes an exit status.
func (f *Factory) Main(args []string) int {
	root := NewCmdRoot(f)
	root.SetArgs(pinCommandWords(root, args))
	root.SetOut(f.Out)
	root.SetErr(f.ErrOut)
	err := root.Execute()
	var st exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &st):
		return int(st)
	}
	fmt.Fprintln(f.Out, err)
	return 1
}

// exitError is the error of a command that has printed all it had to say:
// only its exit status is left.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// exitWith is nil for status 0, else the status as an exitError.
func exitWith(status int) error {
	if status == 0 {
		return nil
	}
	return exitError(status)
}

// scan reads the config file and scans the options of a mode and action
// into a new options value: the one place where a command's arguments are
// parsed. On an option error it prints the messages and returns status 1.
func (f *Factory) scan(mode, action string, args []string) (*options, error) {
	o := defaultOptions()
	path := f.ConfigPath
	if p := os.Getenv(EnvConfigFile); p != "" {
		path = p
	}
	readConfig(path, o)
	// What scanning prints goes to stdout, except with --json, where
	// stdout carries nothing but the JSON object.
	var msgs bytes.Buffer
	err := scanOptions(o, mode, action, args, &msgs)
	var dest io.Writer = f.Out
	if o.json {
		dest = f.ErrOut
	}
	dest.Write(msgs.Bytes())
	for _, l := range o.badResources {
		fmt.Fprintln(f.ErrOut, l)
	}
	if err != nil {
		var re *refusedError
		if errors.As(err, &re) {
			for _, l := range re.lines {
				fmt.Fprintln(f.ErrOut, l)
			}
			return nil, exitError(1)
		}
		var ue *usageError
		if errors.As(err, &ue) {
			for _, l := range ue.lines {
				fmt.Fprintln(dest, l)
			}
		}
		return nil, exitError(1)
	}
	return o, nil
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
