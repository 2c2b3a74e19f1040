package daemon

import (
	"context"

	"github.com/gosanlock/gosanlock/manager"
	"github.com/gosanlock/gosanlock/wire"
)

// registerDiskCmds installs the resource-area commands that work on disk
// without a client's lease set (docs/protocol.md "Commands" #19, #21, #24,
// #12, #35–#40): ALIGN, WRITE_RESOURCE, READ_RESOURCE, READ_RESOURCE_OWNERS and the
// rindex commands (FORMAT, REBUILD, UPDATE, LOOKUP, CREATE_RESOURCE,
// DELETE_RESOURCE). The work is manager.DiskOps; these handlers encode.
func (s *Server) registerDiskCmds(d *manager.DiskOps) {
	s.Handle(wire.CmdAlign, ClassWork, func(_ context.Context, c *Conn, q *wire.Request) error {
		var path string
		if q.Disk != nil {
			path = q.Disk.Path
		}
		align, err := d.Align(path)
		if err != nil {
			return c.Reply(q, c.result(err))
		}
		return c.Reply(q, int32(align))
	})
	s.Handle(wire.CmdWriteResource, ClassWork, func(ctx context.Context, c *Conn, q *wire.Request) error {
		err := d.WriteResource(ctx, resourceOf(q), q.Header.Data, q.Header.CmdFlags&wire.WriteClear != 0)
		return c.Reply(q, c.result(err))
	})
	s.Handle(wire.CmdReadResource, ClassWork, func(ctx context.Context, c *Conn, q *wire.Request) error {
		// The reply always carries the resource (no disks): as read on
		// success, else as it was sent.
		res := resourceOf(q)
		rv := c.result(d.ReadResource(ctx, &res))
		res.Disks = nil
		return c.send(&wire.Reply{Header: replyHeader(q, rv, 0), Resource: &res})
	})
	s.Handle(wire.CmdReadResourceOwners, ClassWork, func(ctx context.Context, c *Conn, q *wire.Request) error {
		// The resource, then one sanlk_host per owner.
		res := resourceOf(q)
		owners, err := d.ReadResourceOwners(ctx, &res)
		res.Disks = nil
		rp := wire.Reply{Header: replyHeader(q, c.result(err), 0), Resource: &res}
		for _, o := range owners {
			rp.Hosts = append(rp.Hosts, wire.Host{HostID: o.HostID, Generation: o.Generation, Timestamp: o.Timestamp})
		}
		return c.send(&rp)
	})
	s.Handle(wire.CmdFormatRIndex, ClassWork, func(ctx context.Context, c *Conn, q *wire.Request) error {
		return c.Reply(q, c.result(d.FormatRindex(ctx, rindexOf(q))))
	})
	s.Handle(wire.CmdRebuildRIndex, ClassWork, func(ctx context.Context, c *Conn, q *wire.Request) error {
		return c.Reply(q, c.result(d.RebuildRindex(ctx, rindexOf(q), q.Header.CmdFlags&wire.RXNoLockspace != 0)))
	})
	s.Handle(wire.CmdUpdateRIndex, ClassWork, rindexEntryCmd(func(ctx context.Context, q *wire.Request, rx wire.RIndex, e wire.REntry) (wire.REntry, error) {
		return d.UpdateRindex(ctx, rx, e, q.Header.CmdFlags)
	}))
	s.Handle(wire.CmdLookupRIndex, ClassWork, rindexEntryCmd(func(ctx context.Context, q *wire.Request, rx wire.RIndex, e wire.REntry) (wire.REntry, error) {
		return d.LookupRindex(ctx, rx, e, q.Header.CmdFlags)
	}))
	s.Handle(wire.CmdCreateResource, ClassWork, rindexEntryCmd(func(ctx context.Context, q *wire.Request, rx wire.RIndex, e wire.REntry) (wire.REntry, error) {
		return d.CreateResource(ctx, rx, e, q.Header.Data2)
	}))
	s.Handle(wire.CmdDeleteResource, ClassWork, rindexEntryCmd(func(ctx context.Context, q *wire.Request, rx wire.RIndex, e wire.REntry) (wire.REntry, error) {
		return d.DeleteResource(ctx, rx, e)
	}))
}

// resourceOf returns the request's resource (with its disks).
func resourceOf(q *wire.Request) wire.Resource {
	if len(q.Resources) == 0 {
		return wire.Resource{}
	}
	return q.Resources[0]
}

func rindexOf(q *wire.Request) wire.RIndex {
	if q.RIndex == nil {
		return wire.RIndex{}
	}
	return *q.RIndex
}

// rindexEntryCmd wraps the four commands whose reply is the header (length
// 32 + 64, data2 0) and a sanlk_rentry, which is all zero on failure.
func rindexEntryCmd(f func(context.Context, *wire.Request, wire.RIndex, wire.REntry) (wire.REntry, error)) Handler {
	return func(ctx context.Context, c *Conn, q *wire.Request) error {
		var in wire.REntry
		if q.REntry != nil {
			in = *q.REntry
		}
		out, err := f(ctx, q, rindexOf(q), in)
		rv := c.result(err)
		if rv < 0 {
			out = wire.REntry{}
		}
		return c.send(&wire.Reply{Header: replyHeader(q, rv, 0), REntry: &out})
	}
}
