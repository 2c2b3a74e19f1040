package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/rescode"
)

// helloWait bounds how long `client reexec` waits for the daemon to
// answer the private hello before it concludes that the daemon is not
// gosanlock (a sanlock daemon never answers a private command).
const helloWait = 5 * time.Second

// reexec is `sanlock client reexec` (gosanlock's own, docs/upgrade.md):
// the daemon hands over to a new image of its own binary, the file at
// the path it was started from (install the new binary there first), and
// answers once the new image serves. On failure it prints the daemon's
// reason on stderr; the old image serves on. The daemon never executes a
// path a client names (docs/security.md "Re-exec"): -e PATH is refused
// here, before anything is sent.
func (c *clientRun) reexec(path string) int {
	c.printf("reexec\n")
	if path != "" {
		fmt.Fprintf(c.stderr, "reexec: -e %s: the daemon re-executes only its own binary (the path it was started from); "+
			"install the new binary there, then run reexec without -e\n", path)
		c.printf("reexec done %d\n", rescode.RvEINVAL)
		return rescode.RvEINVAL
	}
	var why error
	r := c.call(func() error {
		if err := c.cl.Hello(context.Background(), helloWait); err != nil {
			why = err
			if errors.Is(err, client.ErrNotGosanlock) {
				return &rescode.Error{Code: rescode.RvENOSYS}
			}
			return err
		}
		why = c.cl.Reexec(context.Background())
		return why
	})
	if why != nil {
		fmt.Fprintf(c.stderr, "reexec failed: %v\n", why)
		c.reported = true // the reason is said; no second line from diagnose
	}
	c.printf("reexec done %d\n", r)
	return r
}
