package wire

import (
	"strconv"
	"strings"

	"github.com/gosanlock/gosanlock/internal/cnum"
	"github.com/gosanlock/gosanlock/rescode"
)

// Argument and state strings of the sanlock tools (docs/protocol.md "Text forms"). Paths are
// "exported" by prefixing ':' and ' ' with a backslash, and "imported" by
// removing backslashes.

// Result codes of the C resource-string parser (docs/protocol.md "Text forms").
const (
	rvENXIO = -6 // string shorter than 3 characters
)

// maxResString is the longest resource string the daemon formats for
// INQUIRE before failing with -ELIBBAD (docs/protocol.md "Commands").
const maxResString = 4399

const mib = 1048576

// EscapePath exports a path: ':' and ' ' get a backslash prefix.
func EscapePath(p string) string {
	if !strings.ContainsAny(p, ": ") {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == ':' || p[i] == ' ' {
			b.WriteByte('\\')
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// ImportPath removes the escaping backslashes of a path: "\x" is x, and a
// trailing lone backslash is dropped (docs/protocol.md "Text forms").
func ImportPath(p string) string {
	if !strings.Contains(p, "\\") {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' {
			i++
			if i >= len(p) {
				break
			}
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// ResourceString formats a resource like res_to_str (docs/protocol.md "Text forms"):
// <ls>:<name>{:<exported path>:<offset>}, then :SH when shared, else :<lver>.
func ResourceString(r *Resource) string {
	var b strings.Builder
	b.WriteString(r.LockspaceName)
	b.WriteByte(':')
	b.WriteString(r.Name)
	for i := range r.Disks {
		b.WriteByte(':')
		b.WriteString(EscapePath(r.Disks[i].Path))
		b.WriteByte(':')
		b.WriteString(strconv.FormatUint(r.Disks[i].Offset, 10))
	}
	if r.Flags&ResShared != 0 {
		b.WriteString(":SH")
	} else {
		b.WriteByte(':')
		b.WriteString(strconv.FormatUint(r.LVer, 10))
	}
	return b.String()
}

// FormatState joins resource strings with single spaces as the daemon does
// for INQUIRE. Like the daemon it fails with *rescode.Error -81 (ELIBSCN) when a
// resource string contains a space (any path with a space) and -80
// (ELIBBAD) when one is longer than 4399 bytes.
func FormatState(res []Resource) (string, error) {
	parts := make([]string, 0, len(res))
	for i := range res {
		s := ResourceString(&res[i])
		if len(s) > maxResString {
			return "", &rescode.Error{Code: rescode.RvELIBBAD}
		}
		if strings.IndexByte(s, ' ') >= 0 {
			return "", &rescode.Error{Code: rescode.RvELIBSCN}
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " "), nil
}

// ParseState splits a state string into resources. Entries are separated by
// unescaped spaces; a space before the third colon of an entry belongs to
// the entry (docs/protocol.md "Text forms").
func ParseState(s string) ([]Resource, error) {
	var out []Resource
	start, colons := 0, 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) {
			switch s[i] {
			case '\\':
				i++
				continue
			case ':':
				colons++
				continue
			case ' ':
				if colons < 3 {
					continue
				}
			default:
				continue
			}
		}
		if i > start {
			r, err := ParseResource(s[start:i])
			if err != nil {
				return out, err
			}
			out = append(out, *r)
		}
		start, colons = i+1, 0
	}
	return out, nil
}

// truncate cuts s to at most n bytes, as the fixed-size C buffers do.
func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// SplitUnescaped splits s at its first n colons that are not escaped by a
// backslash (a backslash skips the next character); at most n+1 fields.
func SplitUnescaped(s string, n int) []string {
	var fields []string
	start := 0
	for i := 0; i < len(s) && len(fields) < n; i++ {
		switch s[i] {
		case '\\':
			i++
		case ':':
			fields = append(fields, s[start:i])
			start = i + 1
		}
	}
	return append(fields, s[start:])
}

// rewriteM applies the "M offset" shorthand of docs/protocol.md "Text forms": when the
// string has three colons (plain search, not escape-aware) and an 'M'
// somewhere after the third, the text between the third colon and the 'M'
// (at most 15 bytes, read with atoll) is taken as MiB and replaced by the
// byte count. Text after the 'M' is dropped up to the next colon after the
// third one, which is kept with everything after it.
func rewriteM(s string) string {
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
	out := s[:third+1] + strconv.FormatUint(uint64(cnum.Atoll(num))*mib, 10)
	if i := strings.IndexByte(s[third+1:], ':'); i >= 0 {
		out += s[third+1+i:]
	}
	return out
}

// ParseOffsetM reads an offset that may end in 'M' (MiB); the digits
// before the 'M' (or the whole string) are read with atoll.
func ParseOffsetM(s string) uint64 {
	if i := strings.IndexByte(s, 'M'); i >= 0 {
		return uint64(cnum.Atoll(s[:i])) * mib
	}
	return uint64(cnum.Atoll(s))
}

// ParseLockspace parses "<name>:<host_id>:<path>:<offset>" (docs/protocol.md "Text forms").
// It never fails: missing fields stay zero, the name keeps its backslashes
// and is cut to 48 bytes, the path is imported and cut to 1023 bytes, and an
// "M" offset suffix means MiB.
func ParseLockspace(s string) *Lockspace {
	f := SplitUnescaped(rewriteM(s), 3)
	ls := &Lockspace{Name: truncate(f[0], NameLen)}
	if len(f) > 1 {
		ls.HostID = uint64(cnum.Atoll(f[1]))
	}
	if len(f) > 2 {
		ls.Disk.Path = truncate(ImportPath(f[2]), PathLen-1)
	}
	if len(f) > 3 {
		ls.Disk.Offset = uint64(cnum.Atoll(f[3]))
	}
	return ls
}

// LockspaceString formats a lockspace as the tools print it in status:
// <name>:<host_id>:<exported path>:<offset>.
func LockspaceString(ls *Lockspace) string {
	return ls.Name + ":" + strconv.FormatUint(ls.HostID, 10) + ":" +
		EscapePath(ls.Disk.Path) + ":" + strconv.FormatUint(ls.Disk.Offset, 10)
}

// ParseResource parses "<ls>:<res>:<path>:<offset>[:<path>:<offset>...][:<lver>|:SH]"
// (docs/protocol.md "Text forms"). Errors are *rescode.Error with the C parser's codes: -6 for a
// string shorter than 3 characters, -1 for 0 or 2 colons or a malformed
// field, -2 for more than 4 disks. An lver sets ResLVer, "SH" ResShared.
func ParseResource(s string) (*Resource, error) {
	s = rewriteM(s)
	if len(s) < 3 {
		return nil, &rescode.Error{Code: rvENXIO}
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
		return nil, &rescode.Error{Code: rescode.RvEPERM}
	}
	nd := (colons - 1) / 2
	if nd > MaxDisks {
		return nil, &rescode.Error{Code: rescode.RvENOENT}
	}
	hasLVer := (colons-1)%2 == 1

	// Split into fields, removing escapes.
	var fields []string
	var cur strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
			if i >= len(s) {
				return nil, &rescode.Error{Code: rescode.RvEPERM}
			}
			cur.WriteByte(s[i])
		case ':':
			fields = append(fields, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(s[i])
		}
	}
	fields = append(fields, cur.String())

	r := &Resource{LockspaceName: fields[0], Name: fields[1], NumDisks: uint32(nd)}
	if len(r.LockspaceName) > NameLen || len(r.Name) > NameLen {
		return nil, &rescode.Error{Code: rescode.RvEPERM}
	}
	if nd > 0 {
		r.Disks = make([]Disk, nd)
	}
	for i := 0; i < nd; i++ {
		p, off := fields[2+2*i], fields[3+2*i]
		if len(p) == 0 || len(p) >= PathLen {
			return nil, &rescode.Error{Code: rescode.RvEPERM}
		}
		v, ok := cnum.Strtoull(off, 10) // sscanf "%llu"
		if !ok {
			return nil, &rescode.Error{Code: rescode.RvEPERM}
		}
		r.Disks[i] = Disk{Path: p, Offset: v}
	}
	if hasLVer {
		last := fields[len(fields)-1]
		if strings.HasPrefix(last, "SH") {
			r.Flags |= ResShared
		} else {
			r.Flags |= ResLVer
			r.LVer, _ = cnum.Strtoull(last, 0)
		}
	}
	return r, nil
}

// ParseRIndex parses "<ls>:<path>:<offset>" (docs/protocol.md "Text forms"); the name is cut
// to 48 bytes, the path imported, and the offset may use an M suffix.
func ParseRIndex(s string) *RIndex {
	f := SplitUnescaped(s, 2)
	ri := &RIndex{LockspaceName: truncate(f[0], NameLen)}
	if len(f) > 1 {
		ri.Disk.Path = truncate(ImportPath(f[1]), PathLen-1)
	}
	if len(f) > 2 {
		ri.Disk.Offset = ParseOffsetM(f[2])
	}
	return ri
}
