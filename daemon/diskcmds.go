package daemon

import (
	"context"

	"go.uber.org/zap"

	"github.com/gosanlock/gosanlock/client"
	"github.com/gosanlock/gosanlock/manager"
)

// registerDiskCmds installs the resource-area commands that work on disk
// without a client's lease set (docs/protocol.md "Commands" #19, #21, #24,
// #35–#40): WRITE_RESOURCE, READ_RESOURCE, READ_RESOURCE_OWNERS and the
// rindex commands (FORMAT, REBUILD, UPDATE, LOOKUP, CREATE_RESOURCE,
// DELETE_RESOURCE). The work is manager.DiskOps; these handlers encode.
func (s *Server) registerDiskCmds() {
	var ls *manager.Lockspaces
	if s.deps.Manager != nil {
		ls = s.deps.Manager.Lockspaces
	}
	d := manager.NewDiskOps(ls, func() *zap.Logger { return s.lg }, s.cfg.WriteInitIOTimeout)
	s.Handle(client.CmdWriteResource, ClassWork, func(ctx context.Context, c *Conn, q *client.Request) error {
		err := d.WriteResource(ctx, resourceOf(q), q.Header.Data, q.Header.CmdFlags&client.WriteClear != 0)
		return c.Reply(q, result(err))
	})
	s.Handle(client.CmdReadResource, ClassWork, func(ctx context.Context, c *Conn, q *client.Request) error {
		// The reply always carries the resource (no disks): as read on
		// success, else as it was sent.
		res := resourceOf(q)
		rv := result(d.ReadResource(ctx, &res))
		h := q.Header
		h.Version, h.Data, h.Data2 = client.ProtoVersion, uint32(rv), 0
		h.Length = client.HeaderSize + client.ResourceSize
		res.Disks = nil
		b, err := res.AppendBinary(h.Bytes())
		if err != nil {
			return err
		}
		return c.write(b)
	})
	s.Handle(client.CmdReadResourceOwners, ClassWork, func(ctx context.Context, c *Conn, q *client.Request) error {
		// The resource, then one sanlk_host per owner.
		res := resourceOf(q)
		owners, err := d.ReadResourceOwners(ctx, &res)
		h := q.Header
		h.Version, h.Data, h.Data2 = client.ProtoVersion, uint32(result(err)), uint32(len(owners))
		h.Length = uint32(client.HeaderSize + client.ResourceSize + client.HostSize*len(owners))
		res.Disks = nil
		b, err := res.AppendBinary(h.Bytes())
		if err != nil {
			return err
		}
		for _, o := range owners {
			host := client.Host{HostID: o.HostID, Generation: o.Generation, Timestamp: o.Timestamp}
			if b, err = host.AppendBinary(b); err != nil {
				return err
			}
		}
		return c.write(b)
	})
	s.Handle(client.CmdFormatRIndex, ClassWork, func(ctx context.Context, c *Conn, q *client.Request) error {
		return c.Reply(q, result(d.FormatRindex(ctx, rindexOf(q))))
	})
	s.Handle(client.CmdRebuildRIndex, ClassWork, func(ctx context.Context, c *Conn, q *client.Request) error {
		return c.Reply(q, result(d.RebuildRindex(ctx, rindexOf(q), q.Header.CmdFlags&client.RXNoLockspace != 0)))
	})
	s.Handle(client.CmdUpdateRIndex, ClassWork, rindexEntryCmd(func(ctx context.Context, q *client.Request, rx client.RIndex, e client.REntry) (client.REntry, error) {
		return d.UpdateRindex(ctx, rx, e, q.Header.CmdFlags)
	}))
	s.Handle(client.CmdLookupRIndex, ClassWork, rindexEntryCmd(func(ctx context.Context, q *client.Request, rx client.RIndex, e client.REntry) (client.REntry, error) {
		return d.LookupRindex(ctx, rx, e, q.Header.CmdFlags)
	}))
	s.Handle(client.CmdCreateResource, ClassWork, rindexEntryCmd(func(ctx context.Context, q *client.Request, rx client.RIndex, e client.REntry) (client.REntry, error) {
		return d.CreateResource(ctx, rx, e, q.Header.Data2)
	}))
	s.Handle(client.CmdDeleteResource, ClassWork, rindexEntryCmd(func(ctx context.Context, q *client.Request, rx client.RIndex, e client.REntry) (client.REntry, error) {
		return d.DeleteResource(ctx, rx, e)
	}))
}

// resourceOf returns the request's resource (with its disks).
func resourceOf(q *client.Request) client.Resource {
	if len(q.Resources) == 0 {
		return client.Resource{}
	}
	return q.Resources[0]
}

func rindexOf(q *client.Request) client.RIndex {
	if q.RIndex == nil {
		return client.RIndex{}
	}
	return *q.RIndex
}

// rindexEntryCmd wraps the four commands whose reply is the header (length
// 32 + 64, data2 0) and a sanlk_rentry, which is all zero on failure.
func rindexEntryCmd(f func(context.Context, *client.Request, client.RIndex, client.REntry) (client.REntry, error)) Handler {
	return func(ctx context.Context, c *Conn, q *client.Request) error {
		var in client.REntry
		if q.REntry != nil {
			in = *q.REntry
		}
		out, err := f(ctx, q, rindexOf(q), in)
		rv := result(err)
		if rv < 0 {
			out = client.REntry{}
		}
		h := q.Header
		h.Version, h.Data, h.Data2 = client.ProtoVersion, uint32(rv), 0
		h.Length = client.HeaderSize + client.REntrySize
		b, err := out.AppendBinary(h.Bytes())
		if err != nil {
			return err
		}
		return c.write(b)
	}
}
