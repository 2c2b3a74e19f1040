// Command wdmd is the gosanlock version of wdmd, sanlock's watchdog
// multiplexing daemon, with the command line, files and socket protocol
// of wdmd 3.8.5.
package main

import (
	"os"

	"github.com/gosanlock/gosanlock/cmd/internal/wdmdcli"
)

func main() { os.Exit(wdmdcli.Main(os.Args, os.Stdout, os.Stderr)) }
