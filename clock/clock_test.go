package clock_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gosanlock/gosanlock/clock"
)

func TestSystemOnFakeTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clock.NewAt(5*time.Second + 900*time.Millisecond)
		require.Equal(t, uint64(5), clock.Monotime(c), "whole seconds, fraction dropped")
		require.NoError(t, c.Sleep(context.Background(), 2*time.Second))
		require.Equal(t, 7*time.Second+900*time.Millisecond, c.Now())
		<-c.After(time.Second)
		require.Equal(t, uint64(8), clock.Monotime(c))

		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		require.ErrorIs(t, c.Sleep(ctx, time.Hour), context.Canceled)
		require.Equal(t, uint64(8), clock.Monotime(c), "a cancelled sleep does not wait")
	})
}

func TestNewSystemIsAboveZero(t *testing.T) {
	require.Positive(t, clock.NewSystem().Now())
}
