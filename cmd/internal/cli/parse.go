package cli

import (
	"strconv"
	"strings"

	"github.com/gosanlock/gosanlock/diskfmt"
)

// lockspaceArg is a parsed LOCKSPACE string, name:host_id:path:offset.
type lockspaceArg struct {
	Name   string
	HostID uint64
	Path   string
	Offset uint64
}

// diskArg is one path:offset pair of a RESOURCE string.
type diskArg struct {
	Path   string
	Offset uint64
}

// resourceArg is a parsed RESOURCE string.
type resourceArg struct {
	Lockspace string
	Name      string
	Disks     []diskArg
	Lver      uint64
	HasLver   bool
	Shared    bool
}

// rindexArg is a parsed RINDEX string, name:path:offset.
type rindexArg struct {
	Lockspace string
	Path      string
	Offset    uint64
}

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

// importPath removes the escaping backslashes of a path ("\x" is x).
func importPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
			if i >= len(s) {
				break
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// exportPath escapes ':' and ' ' with a backslash, the form paths take in
// status, inquire and resource strings.
func exportPath(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == ':' || s[i] == ' ' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// splitUnescaped splits s at its first n colons that are not escaped by a
// backslash (a backslash skips the next character). The result has at most
// n+1 fields.
func splitUnescaped(s string, n int) []string {
	var out []string
	start := 0
	for i := 0; i < len(s) && len(out) < n; i++ {
		switch s[i] {
		case '\\':
			i++
		case ':':
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
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

// rewriteMOffset applies sanlock's "M" offset shorthand to a LOCKSPACE or
// RESOURCE string: when the string has three colons (plain search, not
// escape-aware) and an 'M' somewhere after the third, the text between the
// third colon and the 'M' (at most 15 bytes, read with atoll) is taken as
// MiB and replaced by the byte count. Text after the 'M' is dropped up to
// the next colon after the third one, which is kept with everything after
// it.
func rewriteMOffset(s string) string {
	third := -1
	from := 0
	for k := 0; k < 3; k++ {
		i := strings.IndexByte(s[from:], ':')
		if i < 0 {
			return s
		}
		third = from + i
		from = third + 1
	}
	m := strings.IndexByte(s[third+1:], 'M')
	if m < 0 {
		return s
	}
	num := s[third+1 : third+1+m]
	if len(num) > 15 {
		num = num[:15]
	}
	out := s[:third+1] + strconv.FormatUint(uint64(atoll(num))*diskfmt.MiB, 10)
	if i := strings.IndexByte(s[third+1:], ':'); i >= 0 {
		out += s[third+1+i:]
	}
	return out
}

// parseLockspace parses -s name:host_id:path:offset. Missing fields are
// left zero; it never fails.
func parseLockspace(s string) lockspaceArg {
	s = rewriteMOffset(s)
	f := splitUnescaped(s, 3)
	var ls lockspaceArg
	ls.Name = truncName(f[0])
	if len(f) > 1 {
		ls.HostID = uint64(atoll(f[1]))
	}
	if len(f) > 2 {
		ls.Path = truncPath(importPath(f[2]))
	}
	if len(f) > 3 {
		ls.Offset = uint64(atoll(f[3]))
	}
	return ls
}

// scanLLU is sscanf("%llu"): it needs at least one digit.
func scanLLU(s string) (uint64, bool) {
	return strtoull(s, 10)
}

// parseResource parses -r ls:res:path:offset[:path:offset...][:lver|:SH].
// It returns a negative errno on error: -6 for a string shorter than three
// bytes, -1 for a malformed string, -2 for more than four disks.
func parseResource(s string) (resourceArg, int) {
	var r resourceArg
	s = rewriteMOffset(s)
	if len(s) < 3 {
		return r, -6
	}
	colons := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case ':':
			colons++
		}
	}
	if colons == 0 || colons == 2 {
		return r, -1
	}
	ndisks := (colons - 1) / 2
	hasLver := (colons-1)%2 == 1
	if ndisks > diskfmt.MaxDisks {
		return r, -2
	}
	// Split into fields, removing escapes.
	var fields []string
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' {
			i++
			if i >= len(s) {
				return resourceArg{}, -1
			}
			b.WriteByte(s[i])
			continue
		}
		if c == ':' {
			fields = append(fields, b.String())
			b.Reset()
			continue
		}
		b.WriteByte(c)
	}
	fields = append(fields, b.String())

	if len(fields[0]) > diskfmt.NameLen || len(fields[1]) > diskfmt.NameLen {
		return resourceArg{}, -1
	}
	r.Lockspace, r.Name = fields[0], fields[1]
	for d := 0; d < ndisks; d++ {
		p, o := fields[2+2*d], fields[3+2*d]
		if len(p) == 0 || len(p) > diskfmt.MaxPathLen {
			return resourceArg{}, -1
		}
		off, ok := scanLLU(o)
		if !ok {
			return resourceArg{}, -1
		}
		r.Disks = append(r.Disks, diskArg{Path: p, Offset: off})
	}
	if hasLver {
		last := fields[len(fields)-1]
		if strings.HasPrefix(last, "SH") {
			r.Shared = true
		} else {
			r.Lver, _ = strtoull(last, 0)
			r.HasLver = true
		}
	}
	return r, 0
}

// parseMOffset reads an offset that may end in 'M' (MiB).
func parseMOffset(s string) uint64 {
	if i := strings.IndexByte(s, 'M'); i >= 0 {
		return uint64(atoll(s[:i])) * diskfmt.MiB
	}
	return uint64(atoll(s))
}

// parseRindex parses -x name:path:offset.
func parseRindex(s string) rindexArg {
	f := splitUnescaped(s, 2)
	var rx rindexArg
	rx.Lockspace = truncName(f[0])
	if len(f) > 1 {
		rx.Path = truncPath(importPath(f[1]))
	}
	if len(f) > 2 {
		rx.Offset = parseMOffset(f[2])
	}
	return rx
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
	e.Offset = parseMOffset(s[i+1:])
	return e
}

// parseDumpPath parses path[:offset[:size]] of direct dump; offset and size
// may end in 'M'.
func parseDumpPath(s string) dumpArg {
	f := splitUnescaped(s, 2)
	d := dumpArg{Path: truncPath(importPath(f[0]))}
	if len(f) > 1 {
		d.Offset = parseMOffset(f[1])
	}
	if len(f) > 2 {
		d.Size = parseMOffset(f[2])
	}
	return d
}

// parseNextFreePath parses path[:offset] of direct next_free. Unlike dump,
// the offset has no 'M' shorthand (the 3.8.5 binary reads it with atoll,
// so "1M" is byte 1).
func parseNextFreePath(s string) dumpArg {
	f := splitUnescaped(s, 2)
	d := dumpArg{Path: truncPath(importPath(f[0]))}
	if len(f) > 1 {
		d.Offset = uint64(atoll(f[1]))
	}
	return d
}

// resourceString renders a resource the way sanlock prints it:
// ls:name[:exported path:offset...]:lver or :SH.
func resourceString(r resourceArg) string {
	var b strings.Builder
	b.WriteString(r.Lockspace)
	b.WriteByte(':')
	b.WriteString(r.Name)
	for _, d := range r.Disks {
		b.WriteByte(':')
		b.WriteString(exportPath(d.Path))
		b.WriteByte(':')
		b.WriteString(strconv.FormatUint(d.Offset, 10))
	}
	if r.Shared {
		b.WriteString(":SH")
	} else {
		b.WriteByte(':')
		b.WriteString(strconv.FormatUint(r.Lver, 10))
	}
	return b.String()
}
