package delta

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/zap"
)

// The Logf form of Config gets each line as the message and its fields.
func TestLogfLogger(t *testing.T) {
	var got []string
	lg := logfLogger(func(format string, args ...any) { got = append(got, fmt.Sprintf(format, args...)) })
	lg.With(zap.String("lockspace", "LS")).Info("renewal error", zap.Uint64("delta_length", 1), zap.String("cause", "x y"))
	lg.Info("delta_acquire fast reacquire")
	assert.Equal(t, []string{"renewal error lockspace=LS delta_length=1 cause=x y", "delta_acquire fast reacquire"}, got)
}
