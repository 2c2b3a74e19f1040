package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"time"
)

// shell boots two guests on one disk with the trees of da and db and runs
// the lines read from standard input, "A command" or "B command", printing
// each output; for working on scenarios by hand. The guests are stopped
// at the end of the input.
func shell(e *env) (bool, string) {
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		g := e.a
		switch {
		case strings.HasPrefix(line, "A "):
		case strings.HasPrefix(line, "B "):
			g = e.b
		case line == "":
			continue
		default:
			fmt.Println("lab shell: lines are \"A command\" or \"B command\"")
			continue
		}
		out, rc, err := g.sh(5*time.Minute, line[2:])
		fmt.Printf("%s rc %d err %v\n%s\n", g.name, rc, err, out)
	}
	return true, "shell ended"
}
