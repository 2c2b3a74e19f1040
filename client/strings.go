package client

import (
	"strconv"
	"strings"
)

// Argument and state strings of the sanlock tools (cli.md §3). Paths are
// "exported" by prefixing ':' and ' ' with a backslash, and "imported" by
// removing backslashes.

// Result codes of the C resource-string parser (cli.md §3.2).
const (
	rvENXIO = -6 // string shorter than 3 characters
)

// maxResString is the longest resource string the daemon formats for
// INQUIRE before failing with -ELIBBAD (wire.md §6 #9).
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

// ImportPath removes every backslash (the lockspace/rindex parser's rule,
// cli.md §3.1).
func ImportPath(p string) string { return strings.ReplaceAll(p, "\\", "") }

// ResourceString formats a resource like res_to_str (cli.md §3.6):
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
// for INQUIRE. Like the daemon it fails with *Error -81 (ELIBSCN) when a
// resource string contains a space (any path with a space) and -80
// (ELIBBAD) when one is longer than 4399 bytes.
func FormatState(res []Resource) (string, error) {
	parts := make([]string, 0, len(res))
	for i := range res {
		s := ResourceString(&res[i])
		if len(s) > maxResString {
			return "", &Error{Code: RvELIBBAD}
		}
		if strings.IndexByte(s, ' ') >= 0 {
			return "", &Error{Code: RvELIBSCN}
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " "), nil
}

// ParseState splits a state string into resources. Entries are separated by
// unescaped spaces; a space before the third colon of an entry belongs to
// the entry (cli.md §3.6).
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

// atoll parses like C atoll: optional blanks and sign, then leading digits;
// anything else ends the number (no error).
func atoll(s string) int64 {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	var v int64
	for i := 0; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		v = v*10 + int64(s[i]-'0')
	}
	if neg {
		return -v
	}
	return v
}

// nthColon returns the index of the n-th ':' (plain search), or -1.
func nthColon(s string, n int) int {
	for i := 0; i < len(s); i++ {
		if s[i] == ':' {
			n--
			if n == 0 {
				return i
			}
		}
	}
	return -1
}

// rewriteM applies the "M offset" rule of cli.md §3.1/§3.2: when an 'M'
// follows the third colon, the digits right after that colon (at most 15)
// are taken as MiB. keepRest keeps the text from the next colon on
// (resources); otherwise everything after the number is dropped.
func rewriteM(s string, keepRest bool) string {
	c3 := nthColon(s, 3)
	if c3 < 0 {
		return s
	}
	tail := s[c3+1:]
	m := strings.IndexByte(tail, 'M')
	if m < 0 {
		return s
	}
	num := tail[:m]
	if len(num) > 15 {
		num = num[:15]
	}
	out := s[:c3+1] + strconv.FormatInt(atoll(num)*mib, 10)
	if keepRest {
		if c4 := strings.IndexByte(tail, ':'); c4 >= 0 {
			out += tail[c4:]
		}
	}
	return out
}

// splitUnescaped splits s at the first n colons not preceded by a backslash
// (a backslash skips the next character); at most n+1 fields.
func splitUnescaped(s string, n int) []string {
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

// ParseLockspace parses "<name>:<host_id>:<path>:<offset>" (cli.md §3.1).
// Missing fields stay zero; the name keeps its backslashes; the path is
// imported; an "M" offset suffix means MiB.
func ParseLockspace(s string) (*Lockspace, error) {
	s = rewriteM(s, false)
	f := splitUnescaped(s, 3)
	ls := &Lockspace{}
	if len(f[0]) > NameLen {
		return nil, ErrNameTooLong
	}
	ls.Name = f[0]
	if len(f) > 1 {
		ls.HostID = uint64(atoll(f[1]))
	}
	if len(f) > 2 {
		p := ImportPath(f[2])
		if len(p) >= PathLen {
			return nil, ErrPathTooLong
		}
		ls.Disk.Path = p
	}
	if len(f) > 3 {
		ls.Disk.Offset = uint64(atoll(f[3]))
	}
	return ls, nil
}

// LockspaceString formats a lockspace as the tools print it in status:
// <name>:<host_id>:<exported path>:<offset>.
func LockspaceString(ls *Lockspace) string {
	return ls.Name + ":" + strconv.FormatUint(ls.HostID, 10) + ":" +
		EscapePath(ls.Disk.Path) + ":" + strconv.FormatUint(ls.Disk.Offset, 10)
}

// ParseResource parses "<ls>:<res>:<path>:<offset>[:<path>:<offset>...][:<lver>|:SH]"
// (cli.md §3.2). Errors are *Error with the C parser's codes: -6 for a
// string shorter than 3 characters, -1 for 0 or 2 colons or a malformed
// field, -2 for more than 4 disks.
func ParseResource(s string) (*Resource, error) {
	s = rewriteM(s, true)
	if len(s) < 3 {
		return nil, &Error{Code: rvENXIO}
	}
	colons := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
		} else if s[i] == ':' {
			colons++
		}
	}
	if colons == 0 || colons == 2 {
		return nil, &Error{Code: RvEPERM}
	}
	nd := (colons - 1) / 2
	if nd > MaxDisks {
		return nil, &Error{Code: RvENOENT}
	}
	hasLVer := (colons-1)%2 == 1

	// Unescape into fields.
	var fields []string
	var cur strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 >= len(s) {
				return nil, &Error{Code: RvEPERM}
			}
			i++
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
		return nil, &Error{Code: RvEPERM}
	}
	if nd > 0 {
		r.Disks = make([]Disk, nd)
	}
	for i := 0; i < nd; i++ {
		p, off := fields[2+2*i], fields[3+2*i]
		if len(p) == 0 || len(p) >= PathLen {
			return nil, &Error{Code: RvEPERM}
		}
		v, err := strconv.ParseUint(off, 10, 64)
		if err != nil {
			return nil, &Error{Code: RvEPERM}
		}
		r.Disks[i] = Disk{Path: p, Offset: v}
	}
	if hasLVer {
		last := fields[len(fields)-1]
		if strings.HasPrefix(last, "SH") {
			r.Flags |= ResShared
		} else {
			r.Flags |= ResLVer
			r.LVer = strtoull0(last)
		}
	}
	return r, nil
}

// strtoull0 parses like strtoull(s, NULL, 0): 0x hex, leading-0 octal, else
// decimal; stops at the first invalid character.
func strtoull0(s string) uint64 {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	base := uint64(10)
	switch {
	case len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'):
		base, s = 16, s[2:]
	case len(s) > 1 && s[0] == '0':
		base, s = 8, s[1:]
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		var d uint64
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			d = uint64(c - '0')
		case c >= 'a' && c <= 'f':
			d = uint64(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = uint64(c-'A') + 10
		default:
			return v
		}
		if d >= base {
			return v
		}
		v = v*base + d
	}
	return v
}

// ParseRIndex parses "<ls>:<path>:<offset>" (cli.md §3.3); the offset may
// use an M suffix.
func ParseRIndex(s string) (*RIndex, error) {
	f := splitUnescaped(s, 2)
	ri := &RIndex{}
	if len(f[0]) > NameLen {
		return nil, ErrNameTooLong
	}
	ri.LockspaceName = f[0]
	if len(f) > 1 {
		p := ImportPath(f[1])
		if len(p) >= PathLen {
			return nil, ErrPathTooLong
		}
		ri.Disk.Path = p
	}
	if len(f) > 2 {
		ri.Disk.Offset = parseOffsetM(f[2])
	}
	return ri, nil
}

// parseOffsetM parses an offset with an optional M (MiB) suffix.
func parseOffsetM(s string) uint64 {
	if m := strings.IndexByte(s, 'M'); m >= 0 {
		return uint64(atoll(s[:m])) * mib
	}
	return uint64(atoll(s))
}
