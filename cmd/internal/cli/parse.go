package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/diskfmt"
)

// The LOCKSPACE, RESOURCE and RINDEX strings are parsed by the client
// package (client.ParseLockspace, ParseResource, ParseRIndex); the forms
// below exist only on the command line.

// rentryArg is a parsed -e value of the rindex actions, name[:offset].
type rentryArg struct {
	Name   string
	Offset uint64
}

// dumpArg is the path argument of direct dump / next_free.
type dumpArg struct {
	Path   string
	Offset uint64
	Size   uint64
}

// truncName cuts a name to the 48 bytes of the on-disk field.
func truncName(s string) string {
	if len(s) > diskfmt.NameLen {
		return s[:diskfmt.NameLen]
	}
	return s
}

// truncPath cuts a path to the longest the tools keep.
func truncPath(s string) string {
	if len(s) > diskfmt.MaxPathLen {
		return s[:diskfmt.MaxPathLen]
	}
	return s
}

// parseRentry parses the -e value of the rindex actions: name[:offset],
// or :offset for no name.
func parseRentry(s string) rentryArg {
	var e rentryArg
	i := strings.IndexByte(s, ':')
	if i < 0 {
		e.Name = truncName(s)
		return e
	}
	e.Name = truncName(s[:i])
	e.Offset = client.ParseOffsetM(s[i+1:])
	return e
}

// parseDumpPath parses path[:offset[:size]] of direct dump; offset and size
// may end in 'M'.
func parseDumpPath(s string) dumpArg {
	f := client.SplitUnescaped(s, 2)
	d := dumpArg{Path: truncPath(client.ImportPath(f[0]))}
	if len(f) > 1 {
		d.Offset = client.ParseOffsetM(f[1])
	}
	if len(f) > 2 {
		d.Size = client.ParseOffsetM(f[2])
	}
	return d
}

// parseNextFreePath parses path[:offset] of direct next_free. Unlike dump,
// the offset has no 'M' shorthand (the 3.8.5 binary reads it with atoll,
// so "1M" is byte 1).
func parseNextFreePath(s string) dumpArg {
	f := client.SplitUnescaped(s, 2)
	d := dumpArg{Path: truncPath(client.ImportPath(f[0]))}
	if len(f) > 1 {
		d.Offset = uint64(atoll(f[1]))
	}
	return d
}

// nameTooLong is the refusal of a lockspace or resource name longer than
// the 48 bytes of the on-disk field (sanlock would cut it silently).
func nameTooLong(what, name string) string {
	return fmt.Sprintf("sanlock: %s name %q is %d bytes, longer than the %d a lease can hold",
		what, name, len(name), diskfmt.NameLen)
}

// resourceProblem says why a -r value does not parse as
// LOCKSPACE:NAME:PATH:OFFSET[:PATH:OFFSET...][:LVER|:SH].
func resourceProblem(v string) string {
	const form = "expected LOCKSPACE:RESOURCE:PATH:OFFSET[:PATH:OFFSET...][:LVER|:SH]"
	f := client.SplitUnescaped(v, len(v))
	if len(v) < 3 || len(f) == 1 || len(f) == 3 {
		return "not a resource: " + form
	}
	if len(f[0]) > diskfmt.NameLen {
		return strings.TrimPrefix(nameTooLong("lockspace", f[0]), "sanlock: ")
	}
	if len(f[1]) > diskfmt.NameLen {
		return strings.TrimPrefix(nameTooLong("resource", f[1]), "sanlock: ")
	}
	nd := (len(f) - 2) / 2
	if nd > client.MaxDisks {
		return fmt.Sprintf("%d disks, at most %d", nd, client.MaxDisks)
	}
	for i := 2; i < 2+2*nd; i += 2 {
		if f[i] == "" {
			return "empty path: " + form
		}
		if len(f[i]) >= client.PathLen {
			return fmt.Sprintf("path of %d bytes, at most %d", len(f[i]), client.PathLen-1)
		}
		off := strings.TrimSuffix(f[i+1], "M")
		if _, err := strconv.ParseUint(off, 10, 64); err != nil {
			return fmt.Sprintf("offset %q is not a number", f[i+1])
		}
	}
	return form
}
