// Command sanlock is the gosanlock version of the sanlock tool: daemon,
// client and direct (storage) modes with the command line of sanlock 3.8.5.
package main

import (
	"os"

	"github.com/gosanlock/gosanlock/cmd/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args, os.Stdout, os.Stderr)) }
