package cli

import (
	"fmt"
	"path/filepath"
)

// reexec is `sanlock client reexec [-e PATH]` (gosanlock's own,
// docs/upgrade.md): the daemon hands over to PATH (default: its own
// binary, re-read from disk) and answers once the new image serves. On
// failure it prints the daemon's reason on stderr; the old image serves
// on.
func (c *clientRun) reexec(path string) int {
	if path != "" {
		if abs, err := filepath.Abs(path); err == nil {
			path = abs // the daemon's working directory is not ours
		}
	}
	c.printf("reexec %s\n", path)
	var why error
	r := c.call(func() error {
		why = c.cl.Reexec(path)
		return why
	})
	if why != nil {
		fmt.Fprintf(c.stderr, "reexec failed: %v\n", why)
	}
	c.printf("reexec done %d\n", r)
	return r
}
