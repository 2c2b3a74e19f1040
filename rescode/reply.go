package rescode

import (
	"errors"
	"fmt"
	"syscall"
)

// errnoBoundary: codes above it (and below 0) are -errno, codes at or below
// it are sanlock's own.
const errnoBoundary = -200

// CodeName returns the symbolic name of a result code ("SANLK_LEADER_MAGIC",
// "ENOENT"), or "" when unknown.
func CodeName(code int) string { return Code(code).Name() }

// Strerror returns the text for a result code: the sanlock_strerror text for
// sanlock codes (docs/protocol.md "Result codes") and the Linux strerror text for -errno values.
func Strerror(code int) string { return Code(code).Text() }

// Error is a negative result code returned by the daemon (or a connection
// failure mapped to -errno, as libsanlock does).
type Error struct {
	Code int
}

func (e *Error) Error() string {
	return fmt.Sprintf("sanlock: %s (%d)", Strerror(e.Code), e.Code)
}

// Is lets errors.Is(err, syscall.ENOENT) match an *Error{Code: -2}, and two
// *Error values match when their codes are equal.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case *Error:
		return t.Code == e.Code
	case syscall.Errno:
		return e.Code < 0 && e.Code > errnoBoundary && int(t) == -e.Code
	}
	return false
}

// ResultErr converts a wire result into an error: nil for >= 0, else an
// *Error carrying rv.
func ResultErr(rv int32) error {
	if rv < 0 {
		return &Error{Code: int(rv)}
	}
	return nil
}

// ErrorCode extracts the result code from err: the Code of an *Error, -errno
// for a syscall.Errno, -1 (EPERM, libsanlock's generic failure) for others,
// 0 for nil.
func ErrorCode(err error) int {
	if err == nil {
		return 0
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return -int(en)
	}
	return int(ErrEPERM)
}
