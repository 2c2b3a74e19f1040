package process

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHostName(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 100 {
		u, err := NewUUID()
		require.NoError(t, err)
		require.Regexp(t, re, u)
		require.False(t, seen[u])
		seen[u] = true
	}
	h, err := GenerateHostName("vm")
	require.NoError(t, err)
	assert.Len(t, h, 39)
	assert.True(t, strings.HasSuffix(h, ".vm"))
	h, err = GenerateHostName(strings.Repeat("n", 40))
	require.NoError(t, err)
	assert.Len(t, h, 48)
}
