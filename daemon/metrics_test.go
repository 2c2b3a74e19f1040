package daemon

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		got, err := ResolveMetricsAddress(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
		}
	}
	for _, in := range []string{"", "  ", "myhost:9310", "myhost", "127.0.0.1:0", "127.0.0.1:70000",
		"127.0.0.1:http", ":-1", "1.2.3.4.5:99", "[::1", "http://127.0.0.1:9310"} {
		_, err := ResolveMetricsAddress(in)
		assert.Error(t, err, "%q", in)
	}
}

func TestMetricsAddressConfig(t *testing.T) {
	c := DefaultConfig()
	assert.Empty(t, c.MetricsAddress, "metrics are opt-in")
	require.True(t, c.ApplyConfigKey("metrics_address", "127.0.0.1:9310"))
	assert.Equal(t, "127.0.0.1:9310", c.MetricsAddress)
	require.NoError(t, c.ApplyOption('M', "9400"))
	assert.Equal(t, "9400", c.MetricsAddress)
}
