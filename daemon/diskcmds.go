package daemon

// registerDiskCmds installs the resource-area commands that work on disk
// without a client's lease set: WRITE_RESOURCE, READ_RESOURCE,
// READ_RESOURCE_OWNERS and the rindex commands (FORMAT, REBUILD, UPDATE,
// LOOKUP, CREATE_RESOURCE, DELETE_RESOURCE).
func (s *Server) registerDiskCmds() {}
