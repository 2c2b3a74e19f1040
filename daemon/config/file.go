package config

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// LineMax is the longest config-file line read at once; a longer line is
// read as several lines, as sanlock's 128-byte fgets buffer reads it.
const LineMax = 127

// ignoredKeys are the sanlock.conf keys the daemon accepts (and may show
// in status -D) but does not act on, each with the reason the warning
// gives.
var ignoredKeys = map[string]string{
	"quiet_fail":            "accepted, no effect (shown in status -D)",
	"use_aio":               "accepted, no effect (shown in status -D)",
	"names_log_priority":    "accepted, no effect (there is no names log)",
	"debug_hosts":           "accepted, no effect (shown in status -D)",
	"use_hugepages":         "accepted, no effect (no huge pages are used; shown in status -D)",
	"use_compare_and_write": "accepted, no effect (SCSI COMPARE AND WRITE is not implemented)",
	"caw_fua":               "accepted, no effect (SCSI COMPARE AND WRITE is not implemented)",
	"caw_dpo":               "accepted, no effect (SCSI COMPARE AND WRITE is not implemented)",
	"max_worker_threads":    "accepted, no effect (there are no worker threads; shown in status -D)",
	"max_sectors_kb":        "accepted, no effect (the device's max_sectors_kb is left as it is; shown in status -D)",
	"paxos_debug_all":       "accepted, no effect (no extra paxos logging)",
	"debug_io":              "accepted, no effect (no I/O logging)",
	"debug_clients":         "accepted, no effect (shown in status -D)",
}

// IgnoredKey reports whether key is a sanlock.conf key the daemon accepts
// without acting on it, and why.
func IgnoredKey(key string) (reason string, ok bool) {
	reason, ok = ignoredKeys[key]
	return reason, ok
}

// ApplyFile applies the config file at path (docs/cli.md "Config file"):
// each line as sanlock reads it, its key through ApplyConfigKey. A missing
// file is not an error and changes nothing. Every line the daemon does not
// act on (an unknown or ignored key, a key without '=', a line cut at
// LineMax) and a file that exists but cannot be read leave a warning
// "<path>:<line>: <what>" in FileWarnings; the daemon prints and logs them
// when it starts.
func (c *Config) ApplyFile(path string) {
	f, err := os.Open(path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			c.fileWarnings = append(c.fileWarnings, fmt.Sprintf("%s: cannot read: %s (ignored)", path, errText(err)))
		}
		return
	}
	defer f.Close()
	c.applyReader(path, f)
}

// errText is the cause of a file error without the operation and path.
func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// applyReader applies the lines of r, path naming them in the warnings.
func (c *Config) applyReader(path string, r io.Reader) {
	br := bufio.NewReader(r)
	lineNo, atStart := 0, true
	for {
		chunk, err := readChunk(br)
		if chunk == "" && err != nil {
			switch {
			case errors.Is(err, io.EOF):
			case lineNo == 0:
				c.fileWarnings = append(c.fileWarnings, fmt.Sprintf("%s: cannot read: %s (ignored)", path, errText(err)))
			default:
				c.warnf(path, lineNo, "read error: %s (the rest of the file is ignored)", errText(err))
			}
			return
		}
		if atStart {
			lineNo++
		}
		ended := strings.HasSuffix(chunk, "\n")
		if !ended && err == nil && atStart {
			c.warnf(path, lineNo, "line longer than %d characters: read as several lines", LineMax)
		}
		c.applyLine(path, lineNo, chunk)
		atStart = ended
	}
}

// readChunk returns the next chunk of at most LineMax bytes, ending at
// (and including) a newline when there is one.
func readChunk(r *bufio.Reader) (string, error) {
	var b strings.Builder
	for b.Len() < LineMax {
		ch, err := r.ReadByte()
		if err != nil {
			return b.String(), err
		}
		b.WriteByte(ch)
		if ch == '\n' {
			break
		}
	}
	return b.String(), nil
}

// applyLine takes one line: the key is the leading run of characters up
// to a blank, '=' or newline, the value the first token after the first
// '='. Comments ('#' first) and empty lines are skipped.
func (c *Config) applyLine(path string, lineNo int, line string) {
	if line == "" || line[0] == '#' || line[0] == '\n' {
		return
	}
	end := strings.IndexAny(line, " \t=\n")
	if end < 0 {
		end = len(line)
	}
	key := line[:end]
	if key == "" {
		if strings.TrimSpace(line) != "" {
			c.warnf(path, lineNo, "no key at the start of the line (ignored)")
		}
		return
	}
	eq := strings.IndexByte(line, '=')
	if eq < 0 {
		if strings.TrimSpace(line) != "" {
			c.warnf(path, lineNo, "no \"=\" after key %q (ignored)", key)
		}
		return // a key without a value sets nothing
	}
	val := ""
	if fs := strings.Fields(line[eq+1:]); len(fs) > 0 {
		val = fs[0]
	}
	if !c.ApplyConfigKey(key, val) {
		c.warnf(path, lineNo, "unknown key %q (ignored)", key)
		return
	}
	if reason, ok := ignoredKeys[key]; ok {
		c.warnf(path, lineNo, "key %q %s", key, reason)
	}
}

func (c *Config) warnf(path string, lineNo int, format string, args ...any) {
	c.fileWarnings = append(c.fileWarnings, fmt.Sprintf("%s:%d: ", path, lineNo)+fmt.Sprintf(format, args...))
}

// FileWarnings returns the warnings ApplyFile recorded, in file order.
func (c *Config) FileWarnings() []string { return c.fileWarnings }

// Warnings returns everything the daemon warns about when it starts: the
// config-file warnings, then the "user/group not found" lines of
// ResolveIDs.
func (c *Config) Warnings() []string {
	return append(append([]string(nil), c.fileWarnings...), c.idWarnings...)
}
