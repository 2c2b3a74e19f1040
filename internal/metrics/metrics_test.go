package metrics

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestResolveMetricsAddress(t *testing.T) {
	good := map[string]string{
		"9310":            "127.0.0.1:9310",
		":9310":           "127.0.0.1:9310",
		"localhost:9400":  "127.0.0.1:9400",
		"127.0.0.1":       "127.0.0.1:9310",
		"127.0.0.1:9311":  "127.0.0.1:9311",
		"[::1]:9310":      "[::1]:9310",
		"::1":             "[::1]:9310",
		" 10.1.2.3:80 ":   "10.1.2.3:80",
		"0.0.0.0:9310":    "0.0.0.0:9310",
		"[::]:9310":       "[::]:9310",
		"127.0.0.1:":      "127.0.0.1:9310",
		"localhost":       "127.0.0.1:9310",
		"192.168.0.1":     "192.168.0.1:9310",
		"[fe80::1]:65535": "[fe80::1]:65535",
	}
	for in, want := range good {
		got, err := ResolveAddress(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
		}
	}
	for _, in := range []string{"", "  ", "myhost:9310", "myhost", "127.0.0.1:0", "127.0.0.1:70000",
		"127.0.0.1:http", ":-1", "1.2.3.4.5:99", "[::1", "http://127.0.0.1:9310"} {
		_, err := ResolveAddress(in)
		assert.Error(t, err, "%q", in)
	}
}
