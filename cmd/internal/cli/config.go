package cli

import (
	"bufio"
	"os"
	"strings"
)

// defaultConfigPath is the fixed location of the sanlock config file.
const defaultConfigPath = "/etc/sanlock/sanlock.conf"

// configLineMax is the longest line the reader takes at once; longer lines
// are read as several lines, as sanlock's 128-byte fgets buffer does.
const configLineMax = 127

// readConfig applies the config file at path to o. A missing or unreadable
// file is not an error.
func readConfig(path string, o *options) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for {
		line, err := readConfigLine(r)
		if line == "" && err != nil {
			return
		}
		applyConfigLine(line, o)
	}
}

// readConfigLine returns the next chunk of at most configLineMax bytes,
// ending at (and including) a newline when there is one.
func readConfigLine(r *bufio.Reader) (string, error) {
	var b strings.Builder
	for b.Len() < configLineMax {
		c, err := r.ReadByte()
		if err != nil {
			return b.String(), err
		}
		b.WriteByte(c)
		if c == '\n' {
			break
		}
	}
	return b.String(), nil
}

// applyConfigLine takes one line of the file: the key is the leading run
// of characters up to a blank, '=' or newline, the value the first token
// after the first '='. The daemon package applies it.
func applyConfigLine(line string, o *options) {
	if line == "" || line[0] == '#' || line[0] == '\n' {
		return
	}
	end := strings.IndexAny(line, " \t=\n")
	if end < 0 {
		end = len(line)
	}
	eq := strings.IndexByte(line, '=')
	if eq < 0 {
		return // a key without a value sets nothing
	}
	val := ""
	if fs := strings.Fields(line[eq+1:]); len(fs) > 0 {
		val = fs[0]
	}
	o.cfg.ApplyConfigKey(line[:end], val)
}
