package broker

import (
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/acl"
	"github.com/samsahq/samsa/internal/config"
	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/server"
)

// Operation and resource type shorthands for the handlers' checks.
const (
	opRead            = kmsg.ACLOperationRead
	opWrite           = kmsg.ACLOperationWrite
	opCreate          = kmsg.ACLOperationCreate
	opDelete          = kmsg.ACLOperationDelete
	opAlter           = kmsg.ACLOperationAlter
	opDescribe        = kmsg.ACLOperationDescribe
	opClusterAction   = kmsg.ACLOperationClusterAction
	opDescribeConfigs = kmsg.ACLOperationDescribeConfigs
	opAlterConfigs    = kmsg.ACLOperationAlterConfigs
	opIdempotentWrite = kmsg.ACLOperationIdempotentWrite

	resTopic   = kmsg.ACLResourceTypeTopic
	resGroup   = kmsg.ACLResourceTypeGroup
	resCluster = kmsg.ACLResourceTypeCluster
	resTxnID   = kmsg.ACLResourceTypeTransactionalId
)

// supportedOps are the operations of each resource type that authorized
// operations (KIP-430) report, as Kafka's AclEntry.supportedOperations.
var supportedOps = map[kmsg.ACLResourceType][]kmsg.ACLOperation{
	resTopic:   {opRead, opWrite, opCreate, opDescribe, opDelete, opAlter, opDescribeConfigs, opAlterConfigs},
	resGroup:   {opRead, opDescribe, opDelete, opDescribeConfigs, opAlterConfigs},
	resCluster: {opCreate, opClusterAction, opDescribeConfigs, opAlterConfigs, opIdempotentWrite, opAlter, opDescribe},
	resTxnID:   {opDescribe, opWrite},
}

// newAuthorizer is the authorizer of node's static configs over im's ACLs.
func newAuthorizer(node *config.Node, im *metadata.Image) *acl.Authorizer {
	a := &acl.Authorizer{
		Enabled:      node.AuthorizerClassName != "",
		SuperUsers:   map[string]bool{},
		AllowIfNoACL: node.AllowEveryoneIfNoACLFound,
		Index:        im.ACLIndex(),
	}
	for _, p := range node.SuperUsers {
		a.SuperUsers[p] = true
	}
	return a
}

// updateAuthorizer swaps in an authorizer for next's ACLs when they
// changed.
func (b *Broker) updateAuthorizer(next *metadata.Image) {
	if cur := b.authz.Load(); cur != nil && cur.Index == next.ACLIndex() {
		return
	}
	b.authz.Store(newAuthorizer(b.node, next))
}

// authorizer is the current authorizer.
func (b *Broker) authorizer() *acl.Authorizer {
	if a := b.authz.Load(); a != nil {
		return a
	}
	return &acl.Authorizer{}
}

// connHost is the client's IP address, the host ACLs name.
func connHost(c *server.Conn) string {
	if c == nil {
		return ""
	}
	h, _, err := net.SplitHostPort(c.RemoteAddr)
	if err != nil {
		return c.RemoteAddr
	}
	return h
}

// connPrincipal is the connection's principal (server.Conn.Principal).
func connPrincipal(c *server.Conn) string {
	if c == nil || c.Principal == "" {
		return server.AnonymousPrincipal
	}
	return c.Principal
}

// authorized reports whether c's principal may perform op on (typ, name).
func (b *Broker) authorized(c *server.Conn, op kmsg.ACLOperation, typ kmsg.ACLResourceType, name string) bool {
	a := b.authorizer()
	if a == nil || !a.Enabled {
		return true
	}
	return a.Authorize(connPrincipal(c), connHost(c), op, typ, name)
}

// authorizedCluster reports whether c may perform op on the cluster.
func (b *Broker) authorizedCluster(c *server.Conn, op kmsg.ACLOperation) bool {
	return b.authorized(c, op, resCluster, acl.ClusterName)
}

// AuthorizedClusterAction reports whether c's principal may
// CLUSTER_ACTION the cluster (true without an authorizer): the metadata
// quorum's raft connections need it, as Kafka's ControllerApis require it
// of Vote, BeginQuorumEpoch, EndQuorumEpoch and FetchSnapshot. Safe for
// concurrent use.
func (b *Broker) AuthorizedClusterAction(c *server.Conn) bool {
	return b.authorizedCluster(c, opClusterAction)
}

// authorizedOps is the KIP-430 bit set of the supported operations of
// typ that c may perform on name: bit n set for the operation whose code
// is n.
func (b *Broker) authorizedOps(c *server.Conn, typ kmsg.ACLResourceType, name string) int32 {
	var bits int32
	for _, op := range supportedOps[typ] {
		if b.authorized(c, op, typ, name) {
			bits |= 1 << uint(op)
		}
	}
	return bits
}
