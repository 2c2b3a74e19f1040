package wdmdcli

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestManPage: every option of the usage text (the options the parser
// knows, apart from the hidden test ones) is described in docs/man/wdmd.8,
// and the page describes no other option.
func TestManPage(t *testing.T) {
	b, err := os.ReadFile("../../../docs/man/wdmd.8")
	require.NoError(t, err)
	page := string(b)
	start := strings.Index(page, "\n.SH OPTIONS\n")
	require.GreaterOrEqual(t, start, 0)
	opts := page[start+1:]
	opts = opts[:strings.Index(opts[1:], "\n.SH ")+1]

	want := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)(?:^|, )(--?[A-Za-z][a-z-]*)`).FindAllStringSubmatch(usage, -1) {
		want[m[1]] = true
	}
	delete(want, "-wdmd") // not an option: the "wdmd [options]" line has none
	require.Len(t, want, 19, "%v", want)
	got := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\.BR? (\\-(?:\\-)?[A-Za-z][a-z-]*)(?: ", " (\\-\\-[a-z]+)| "|$)`).FindAllStringSubmatch(opts, -1) {
		got[strings.ReplaceAll(m[1], `\-`, "-")] = true
		if m[2] != "" {
			got[strings.ReplaceAll(m[2], `\-`, "-")] = true
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^\.BI (\\-[A-Za-z]) `).FindAllStringSubmatch(opts, -1) {
		got[strings.ReplaceAll(m[1], `\-`, "-")] = true
	}
	require.Equal(t, want, got)
	for _, code := range []string{".B 0\n", ".B 1\n", ".B 255\n"} {
		require.Contains(t, page, code, "exit status")
	}
}
