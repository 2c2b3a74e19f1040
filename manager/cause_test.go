package manager

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gosanlock/gosanlock/diskfmt"
	"github.com/gosanlock/gosanlock/paxos"
	"github.com/gosanlock/gosanlock/rescode"
)

// TestCauseError: a cause rides with its code through resultErr; the
// code is found by rescode.CodeOf and errors.Is, the text by Cause; a
// bare code has no cause.
func TestCauseError(t *testing.T) {
	err := resultErr(fmt.Errorf("wrapped: %w", causeErr(rescode.ErrENOSPC, "lockspace X is not joined")))
	assert.Equal(t, rescode.ErrENOSPC, rescode.CodeOf(err))
	assert.ErrorIs(t, err, rescode.ErrENOSPC)
	assert.Equal(t, "lockspace X is not joined", Cause(err))
	assert.Equal(t, "lockspace X is not joined: ENOSPC (-28): no space left on device", err.Error())

	assert.Equal(t, error(rescode.ErrEIO), resultErr(rescode.ErrEIO))
	assert.Empty(t, Cause(rescode.ErrEIO))
	assert.Nil(t, resultErr(nil))
	assert.Nil(t, withCause(nil, "x"))
	assert.Equal(t, error(rescode.ErrEIO), withCause(rescode.ErrEIO, ""))
}

// TestPlainCause: the detail of an error without the code's own text,
// nothing for a bare code, a paxos error's detail only.
func TestPlainCause(t *testing.T) {
	align := fmt.Errorf("offset 1000 is not a multiple of the 512-byte sector: %w", rescode.ErrEINVAL)
	assert.Equal(t, "offset 1000 is not a multiple of the 512-byte sector", plainCause(align))
	pe := &paxos.Error{Op: "acquire", Code: rescode.ErrEINVAL, Err: align}
	assert.Equal(t, "offset 1000 is not a multiple of the 512-byte sector", plainCause(pe))
	assert.Empty(t, plainCause(&paxos.Error{Op: "acquire", Code: rescode.ErrAcquireIDLive}))
	assert.Empty(t, plainCause(rescode.ErrEINVAL))
	assert.Empty(t, plainCause(nil))
	assert.Equal(t, "x", plainCause(causeErr(rescode.ErrEIO, "x")))
}

// TestOpenCause: a failed open in plain words, with the path.
func TestOpenCause(t *testing.T) {
	_, err := os.Open("/nonexistent/x")
	assert.Equal(t, "open /nonexistent/x: no such file or directory", openCause("/nonexistent/x", err))
	assert.Equal(t, "open /d: permission denied", openCause("/d", fmt.Errorf("w: %w", syscall.EACCES)))
	assert.Equal(t, "open /d: no such device", openCause("/d", rescode.ErrENODEV))
}

// TestHolderCause names the owner of a lease held elsewhere: without a
// lockspace view its host_id and generation only.
func TestHolderCause(t *testing.T) {
	m := &Resources{}
	ld := &diskfmt.Leader{OwnerID: 2, OwnerGeneration: 3}
	err := m.explain(&spaceErr{space: "LS", err: &paxos.Error{Op: "acquire", Code: rescode.ErrAcquireIDLive, Leader: ld}})
	assert.Equal(t, "held by host_id 2 (generation 3)", Cause(err))
	assert.Equal(t, rescode.ErrAcquireIDLive, rescode.CodeOf(err))
	var pe *paxos.Error
	assert.False(t, errors.As(resultErr(err), &pe), "the manager's API returns the code and the cause only")
}
