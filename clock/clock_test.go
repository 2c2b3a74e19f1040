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

func TestSystemWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clock.NewAt(10 * time.Second)
		wake := make(chan struct{}, 1)
		ctx := context.Background()

		woken, err := c.Wait(ctx, 3*time.Second, wake)
		require.NoError(t, err)
		require.False(t, woken)
		require.Equal(t, 13*time.Second, c.Now(), "no wake-up: the whole wait")

		clock.Wake(wake)
		clock.Wake(wake) // one pending is enough: does not block
		woken, err = c.Wait(ctx, time.Hour, wake)
		require.NoError(t, err)
		require.True(t, woken, "a wake-up sent before the wait ends it at once")
		require.Equal(t, 13*time.Second, c.Now())

		go func() {
			time.Sleep(2 * time.Second)
			clock.Wake(wake)
		}()
		woken, err = c.Wait(ctx, time.Hour, wake)
		require.NoError(t, err)
		require.True(t, woken)
		require.Equal(t, 15*time.Second, c.Now(), "woken when the wake-up came")

		cctx, cancel := context.WithCancel(ctx)
		go func() {
			time.Sleep(time.Second)
			cancel()
		}()
		woken, err = c.Wait(cctx, time.Hour, nil)
		require.ErrorIs(t, err, context.Canceled)
		require.False(t, woken)
		require.Equal(t, 16*time.Second, c.Now())
	})
}
