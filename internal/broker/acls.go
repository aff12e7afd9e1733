package broker

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/acl"
	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/server"
)

// CreateACLs: v1-3
//
// Version notes:
//   - v1: the lowest version served; PREFIXED patterns (KIP-290)
//   - v2: flexible versions: compact encodings and tagged fields (KIP-482)
//   - v3: USER resource type (KIP-373)

// DescribeACLs: v1-3
//
// Version notes:
//   - v1: the lowest version served; pattern type filters (KIP-290)
//   - v2: flexible versions: compact encodings and tagged fields (KIP-482)
//   - v3: USER resource type (KIP-373)

// DeleteACLs: v1-3
//
// Version notes:
//   - v1: the lowest version served; pattern type filters (KIP-290)
//   - v2: flexible versions: compact encodings and tagged fields (KIP-482)
//   - v3: USER resource type (KIP-373)

// The ACL admin APIs (KIP-140): bindings stored in the metadata log as
// AccessControlEntryRecord. CreateAcls and DeleteAcls need ALTER on the
// cluster and are forwarded to the active controller; DescribeAcls needs
// DESCRIBE on the cluster and reads this node's image. They are served
// whether or not authorizer.class.name is set, as Kafka's are with an
// authorizer (without one Kafka answers SECURITY_DISABLED; samsa keeps the
// bindings so they apply once the authorizer is enabled).
func init() {
	register(kmsg.CreateACLs, 1, 3, handleCreateACLs)
	register(kmsg.DescribeACLs, 1, 3, handleDescribeACLs)
	register(kmsg.DeleteACLs, 1, 3, handleDeleteACLs)
}

func handleCreateACLs(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	bs := make([]acl.Binding, len(req.Creations))
	for i, c := range req.Creations {
		bs[i] = acl.Binding{
			ResourceType: c.ResourceType, ResourceName: c.ResourceName, PatternType: c.ResourcePatternType,
			Principal: c.Principal, Host: c.Host, Operation: c.Operation, Permission: c.PermissionType,
		}
	}
	errs, err := b.ctrl.CreateACLs(ctx, bs)
	for i := range req.Creations {
		rc := kmsg.NewCreateACLsResponseResult()
		e := err
		if e == nil {
			e = errs[i]
		}
		rc.ErrorCode, rc.ErrorMessage = aclErrCode(e), errMessage(e)
		resp.Results = append(resp.Results, rc)
	}
	return resp, nil
}

// aclErrCode maps acl.ErrInvalid to INVALID_REQUEST.
func aclErrCode(err error) int16 {
	if errors.Is(err, acl.ErrInvalid) {
		return kerr.InvalidRequest.Code
	}
	return errCode(err)
}

func handleDescribeACLs(_ context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	f := acl.Filter{
		ResourceType: req.ResourceType, ResourceName: req.ResourceName, PatternType: req.ResourcePatternType,
		Principal: req.Principal, Host: req.Host, Operation: req.Operation, Permission: req.PermissionType,
	}
	if err := f.Validate(); err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, errMessage(err)
		return resp, nil
	}
	type res struct {
		typ  kmsg.ACLResourceType
		name string
		pat  kmsg.ACLResourcePatternType
	}
	idx := map[res]int{}
	b.image().ACLs(func(_ metadata.UUID, bd acl.Binding) bool {
		if !f.Matches(bd) {
			return true
		}
		k := res{bd.ResourceType, bd.ResourceName, bd.PatternType}
		i, ok := idx[k]
		if !ok {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = k.typ, k.name, k.pat
			resp.Resources = append(resp.Resources, r)
			i = len(resp.Resources) - 1
			idx[k] = i
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = bd.Principal, bd.Host, bd.Operation, bd.Permission
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, a)
		return true
	})
	return resp, nil
}

func handleDeleteACLs(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	fs := make([]acl.Filter, len(req.Filters))
	for i, f := range req.Filters {
		fs[i] = acl.Filter{
			ResourceType: f.ResourceType, ResourceName: f.ResourceName, PatternType: f.ResourcePatternType,
			Principal: f.Principal, Host: f.Host, Operation: f.Operation, Permission: f.PermissionType,
		}
	}
	matched, errs, err := b.ctrl.DeleteACLs(ctx, fs)
	for i := range req.Filters {
		rf := kmsg.NewDeleteACLsResponseResult()
		switch {
		case err != nil:
			rf.ErrorCode, rf.ErrorMessage = errCode(err), errMessage(err)
		case errs[i] != nil:
			rf.ErrorCode, rf.ErrorMessage = aclErrCode(errs[i]), errMessage(errs[i])
		default:
			for _, bd := range matched[i] {
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName, m.ResourcePatternType = bd.ResourceType, bd.ResourceName, bd.PatternType
				m.Principal, m.Host, m.Operation, m.PermissionType = bd.Principal, bd.Host, bd.Operation, bd.Permission
				rf.MatchingACLs = append(rf.MatchingACLs, m)
			}
		}
		resp.Results = append(resp.Results, rf)
	}
	return resp, nil
}
