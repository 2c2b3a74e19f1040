// Command wdmd-testdev serves emulated watchdog devices to a wdmd started
// with --test-device SOCKET, for machines and containers without a
// watchdog (demos, CI; docs/container.md). An emulated device resets
// nothing: when it fires, wdmd-testdev prints the event and, with
// -exit-on-fire, exits with status 2 so that a supervisor (a container
// runtime with a restart policy, systemd) can stand in for the reset.
// It gives no protection: never use it where leases guard real data.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/gosanlock/gosanlock/wdmd/testdev"
)

func main() {
	socket := flag.String("socket", "/run/wdmd-testdev.sock", "unix socket to serve the devices on")
	fireAfter := flag.Duration("fire-after", 0, "fire this long after the last ping (0: the timeout wdmd sets, 60s)")
	exitOnFire := flag.Bool("exit-on-fire", false, "exit with status 2 when a device fires")
	flag.Parse()

	fired := make(chan testdev.Event, 1)
	bank := testdev.NewBank(testdev.Options{
		FireAfter: *fireAfter,
		Log:       os.Stdout,
		OnFire: func(e testdev.Event) {
			select {
			case fired <- e:
			default:
			}
		},
	})
	_ = os.Remove(*socket)
	srv, err := bank.Serve(*socket)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wdmd-testdev:", err)
		os.Exit(1)
	}
	fmt.Printf("wdmd-testdev: serving emulated watchdog devices on %s\n", *socket)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	status := 0
	for status == 0 {
		select {
		case e := <-fired:
			fmt.Printf("wdmd-testdev: %s fired (monotonic %.3f s): a real watchdog would reset the host now\n",
				e.Path, e.At.Seconds())
			if *exitOnFire {
				status = 2
			}
		case <-sigs:
			status = -1
		}
	}
	_ = srv.Close()
	bank.Stop()
	if status < 0 {
		status = 0
	}
	os.Exit(status)
}
