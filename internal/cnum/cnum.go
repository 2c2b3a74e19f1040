// Package cnum reads numbers the way the C library does (atoi, atoll,
// strtoull), for command-line and argument-string parsing that must match
// the sanlock tool.
package cnum

import "math"

// Only the visible parts of the C behaviour are reproduced: leading blanks
// are skipped, trailing garbage is ignored, and a string without digits is 0.

func isCSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// Strtoll parses like C strtoll(s, NULL, 10): it saturates on overflow.
func Strtoll(s string) int64 {
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	var v uint64
	over := false
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		d := uint64(s[i] - '0')
		if v > (math.MaxUint64-d)/10 {
			over = true
			continue
		}
		v = v*10 + d
	}
	if neg {
		if over || v > 1<<63 {
			return math.MinInt64
		}
		return -int64(v)
	}
	if over || v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

// Atoll is C atoll.
func Atoll(s string) int64 { return Strtoll(s) }

// Atoi is C atoi on an LP64 system: strtol truncated to int.
func Atoi(s string) int { return int(int32(Strtoll(s))) }

// Strtoull parses like C strtoull(s, NULL, base) for base 0 or 10: a
// leading '-' negates modulo 2^64, overflow saturates. ok is false when no
// digits were found.
func Strtoull(s string, base int) (v uint64, ok bool) {
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	if base == 0 {
		switch {
		case i+1 < len(s) && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X') && i+2 < len(s) && hexVal(s[i+2]) >= 0:
			base = 16
			i += 2
		case i < len(s) && s[i] == '0':
			base = 8
		default:
			base = 10
		}
	} else if base == 16 && i+2 < len(s) && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X') && hexVal(s[i+2]) >= 0 {
		i += 2
	}
	over := false
	for ; i < len(s); i++ {
		d := hexVal(s[i])
		if d < 0 || d >= base {
			break
		}
		ok = true
		if v > (math.MaxUint64-uint64(d))/uint64(base) {
			over = true
			continue
		}
		v = v*uint64(base) + uint64(d)
	}
	if over {
		return math.MaxUint64, ok
	}
	if neg {
		v = -v
	}
	return v, ok
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
