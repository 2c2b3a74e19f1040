package client_test

import (
	"context"
	"fmt"
	"time"

	"github.com/gosanlock/gosanlock/client"
)

// Join a lockspace, hold a lease on a registered connection, list what
// is held and leave. Every call takes a context first; flags and results
// are typed. (Programs that hold leases should normally use package lease,
// which adds blocking acquire, fencing tokens and loss notices.)
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := client.Dial("") // $SANLOCK_RUN_DIR or /run/sanlock
	if err != nil {
		panic(err)
	}
	ls := &client.Lockspace{Name: "LS", HostID: 1, Disk: client.Disk{Path: "/dev/shared/leases"}}
	if err := cl.AddLockspace(ctx, ls, 0, 10); err != nil {
		panic(err)
	}
	reg, err := cl.Register(ctx) // the daemon releases our leases when it closes
	if err != nil {
		panic(err)
	}
	defer reg.Close()
	res := client.Resource{LockspaceName: "LS", Name: "R1",
		Disks: []client.Disk{{Path: "/dev/shared/leases", Offset: 1 << 20}}}
	if err := reg.Acquire(ctx, []client.Resource{res}, client.AcquireNoWait, nil); err != nil {
		panic(err)
	}
	inq, err := reg.Inquire(ctx)
	if err != nil {
		panic(err)
	}
	held, err := inq.Resources()
	if err != nil {
		panic(err)
	}
	fmt.Println(held[0].Name, held[0].LVer)
	if _, err := reg.Release(ctx, nil, client.ReleaseAll); err != nil {
		panic(err)
	}
	if err := cl.RemLockspace(ctx, ls, 0); err != nil {
		panic(err)
	}
}
