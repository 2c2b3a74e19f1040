package manager

import (
	"errors"
	"os/exec"
	"strconv"
)

// maxKillArgv is the most argv entries of a kill program, the program
// itself and the pid included (docs/protocol.md "Kill program").
const maxKillArgv = 8

// killpathArgv builds the argv of a client's kill program: the path, then
// args split on unescaped white space ("\ " is a space inside an argument,
// "\\" a backslash), then the pid when pid > 0; at most maxKillArgv
// entries.
func killpathArgv(path, args string, pid int) []string {
	argv := []string{path}
	limit := maxKillArgv
	if pid > 0 {
		limit--
	}
	var cur []byte
	have := false
	flush := func() {
		if have && len(argv) < limit {
			argv = append(argv, string(cur))
		}
		cur, have = cur[:0], false
	}
	for i := 0; i < len(args); i++ {
		ch := args[i]
		switch {
		case ch == '\\' && i+1 < len(args):
			i++
			cur, have = append(cur, args[i]), true
		case ch == ' ' || ch == '\t' || ch == '\n':
			flush()
		default:
			cur, have = append(cur, ch), true
		}
	}
	flush()
	if pid > 0 {
		argv = append(argv, strconv.Itoa(pid))
	}
	return argv
}

// startKillpath starts a kill program and reaps it in the background.
func startKillpath(argv []string) error {
	if len(argv) == 0 || argv[0] == "" {
		return errors.New("empty kill program")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}
