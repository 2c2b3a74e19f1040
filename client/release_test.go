package client

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/gosanlock/gosanlock/wire"
)

func TestReleaseVariants(t *testing.T) {
	// The resource as wire's tests' noDisks(sampleRes("R1", 1)).
	r := Resource{LockspaceName: "LS", Name: "R1", LVer: 7, Flags: ResLVer, NumDisks: 1}
	for _, tc := range []struct {
		flags ReleaseFlags
		res   []Resource
		n     int
	}{
		{RelAll, nil, 0},
		{RelOrphan, []Resource{{LockspaceName: "LS", NumDisks: 0}}, 1},
		{RelRename, []Resource{r, {LockspaceName: "LS", Name: "NEW", NumDisks: 1}}, 2},
	} {
		q := releaseReq(self, tc.res, tc.flags)
		b, err := q.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != HeaderSize+tc.n*ResourceSize {
			t.Errorf("flags %#x: %d bytes", tc.flags, len(b))
		}
		got, err := wire.ReadRequest(bytes.NewReader(b), 0)
		if err != nil || len(got.Resources) != tc.n {
			t.Errorf("flags %#x: %+v %v", tc.flags, got, err)
		}
	}
}

// le and hdrLength, as the wire codec uses them, for tests that build raw
// frames.
var le = binary.LittleEndian

const (
	hdrLength = 16      // offset of the header's length field
	mib       = 1048576 // bytes in a MiB
)
