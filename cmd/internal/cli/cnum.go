package cli

import "github.com/gosanlock/gosanlock/internal/cnum"

// Short names for the C number readers used by the option scanner.

func atoll(s string) int64 { return cnum.Atoll(s) }

func atoi(s string) int { return cnum.Atoi(s) }

func strtoull(s string, base int) (uint64, bool) { return cnum.Strtoull(s, base) }
