package rescode_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gosanlock/gosanlock/rescode"
)

func TestCodeOf(t *testing.T) {
	assert.Equal(t, rescode.Code(0), rescode.CodeOf(nil))
	assert.Equal(t, rescode.Code(-223), rescode.CodeOf(rescode.ErrLeaderMagic))
	assert.Equal(t, rescode.Code(-22), rescode.CodeOf(syscall.EINVAL))
	assert.Equal(t, rescode.Code(-22), rescode.CodeOf(errors.Join(errors.New("x"), syscall.EINVAL)))
	assert.Equal(t, rescode.Code(-2), rescode.CodeOf(syscall.ENOENT))
	assert.Equal(t, rescode.Code(-202), rescode.CodeOf(rescode.ErrIOTimeout))
	assert.Equal(t, rescode.Code(-201), rescode.CodeOf(errors.New("other")))
	assert.Equal(t, "SANLK_LEADER_MAGIC", rescode.ErrLeaderMagic.Name())
	assert.Equal(t, "EINVAL", rescode.ErrEINVAL.Name())
	assert.Contains(t, rescode.ErrLeaderChecksum.Error(), "-229")
}

func TestErrnoValues(t *testing.T) {
	for _, tc := range []struct {
		code  rescode.Code
		errno syscall.Errno
	}{
		{rescode.ErrEPERM, syscall.EPERM}, {rescode.ErrENOENT, syscall.ENOENT}, {rescode.ErrESRCH, syscall.ESRCH},
		{rescode.ErrEIO, syscall.EIO}, {rescode.ErrENXIO, syscall.ENXIO}, {rescode.ErrE2BIG, syscall.E2BIG},
		{rescode.ErrEAGAIN, syscall.EAGAIN}, {rescode.ErrENOMEM, syscall.ENOMEM}, {rescode.ErrEBUSY, syscall.EBUSY},
		{rescode.ErrEEXIST, syscall.EEXIST}, {rescode.ErrENODEV, syscall.ENODEV}, {rescode.ErrEINVAL, syscall.EINVAL},
		{rescode.ErrENOTTY, syscall.ENOTTY}, {rescode.ErrENOSPC, syscall.ENOSPC}, {rescode.ErrERANGE, syscall.ERANGE},
		{rescode.ErrENOCSI, syscall.ENOCSI}, {rescode.ErrELIBACC, syscall.ELIBACC}, {rescode.ErrELIBBAD, syscall.ELIBBAD},
		{rescode.ErrELIBSCN, syscall.ELIBSCN}, {rescode.ErrENOTCONN, syscall.ENOTCONN},
		{rescode.ErrECONNREFUSED, syscall.ECONNREFUSED}, {rescode.ErrEALREADY, syscall.EALREADY},
		{rescode.ErrEINPROGRESS, syscall.EINPROGRESS}, {rescode.ErrESTALE, syscall.ESTALE}, {rescode.ErrEUCLEAN, syscall.EUCLEAN},
	} {
		assert.Equal(t, rescode.Code(-int(tc.errno)), tc.code, "%v", tc.errno)
		assert.Equal(t, tc.code, rescode.CodeOf(tc.errno))
		assert.Equal(t, tc.errno.Error(), tc.code.Text())
		assert.NotEmpty(t, tc.code.Name())
	}
}

func TestReplyError(t *testing.T) {
	err := rescode.ResultErr(rescode.RvENOENT)
	assert.ErrorIs(t, err, syscall.ENOENT)
	assert.NotErrorIs(t, err, syscall.EBUSY)
	assert.ErrorIs(t, err, &rescode.Error{Code: -2})
	assert.NoError(t, rescode.ResultErr(0))
	assert.Equal(t, "sanlock: Lease host ID is being used by another host (-262)",
		(&rescode.Error{Code: int(rescode.ErrHostIDBusy)}).Error())
	assert.Equal(t, 0, rescode.ErrorCode(nil))
	assert.Equal(t, -111, rescode.ErrorCode(syscall.ECONNREFUSED))
	assert.Equal(t, -1, rescode.ErrorCode(errors.New("x")))
	assert.Equal(t, "-210 (SANLK_DBLOCK_READ)", rescode.ErrDblockRead.LogString())
	assert.Equal(t, "-5 (EIO)", rescode.ErrEIO.LogString())
}
