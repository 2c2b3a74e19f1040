package testutil

import (
	"fmt"
	"strings"

	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// LogText is an observed log entry as the sanlock line format shows it
// after the time stamps: the message, then " key=value" for each field
// (docs/cli.md "Logging"); the prefix and tid fields are left out.
func LogText(e observer.LoggedEntry) string {
	var b strings.Builder
	b.WriteString(e.Message)
	for _, f := range e.Context {
		if f.Key == "log-prefix" || f.Key == "tid" {
			continue
		}
		enc := zapcore.NewMapObjectEncoder()
		f.AddTo(enc)
		if v, ok := enc.Fields[f.Key]; ok {
			fmt.Fprint(&b, " ", f.Key, "=", v)
		}
	}
	return b.String()
}
