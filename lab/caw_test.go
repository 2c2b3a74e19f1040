package main

import (
	"strings"
	"testing"
)

// TestCawGuestArgs: each guest's UDP socket sends to the other's port, on
// the loopback only, and the two NICs differ.
func TestCawGuestArgs(t *testing.T) {
	fn, err := cawGuestArgs(&labConfig{Cache: "/c"})
	if err != nil {
		t.Fatal(err)
	}
	a, b := strings.Join(fn("A"), " "), strings.Join(fn("B"), " ")
	field := func(args, key string) string {
		i := strings.Index(args, key+"=")
		if i < 0 {
			t.Fatalf("no %s in %q", key, args)
		}
		return strings.FieldsFunc(args[i+len(key)+1:], func(r rune) bool { return r == ',' || r == ' ' })[0]
	}
	if field(a, "udp") != field(b, "localaddr") || field(b, "udp") != field(a, "localaddr") {
		t.Errorf("ports not crossed: A %q, B %q", a, b)
	}
	for _, args := range []string{a, b} {
		if !strings.HasPrefix(field(args, "udp"), "127.0.0.1:") || !strings.HasPrefix(field(args, "localaddr"), "127.0.0.1:") {
			t.Errorf("not on the loopback: %q", args)
		}
		if !strings.Contains(args, "path=/c/caw,") {
			t.Errorf("no modules share: %q", args)
		}
	}
	if field(a, "mac") == field(b, "mac") {
		t.Errorf("same MAC on both guests")
	}
}

func TestCawResults(t *testing.T) {
	if got := lastRC("add_lockspace done 0\nrc 1\n"); got != "1" {
		t.Errorf("lastRC = %q", got)
	}
	if lastRC("no status") != "?" {
		t.Errorf("lastRC without a status line")
	}
	if !joined("add_lockspace_timeout done 0") || joined("add_lockspace_timeout done -283") || joined("") {
		t.Errorf("joined")
	}
}
