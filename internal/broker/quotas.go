package broker

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/controller"
	"github.com/samsahq/samsa/internal/quota"
	"github.com/samsahq/samsa/internal/server"
)

// DescribeClientQuotas: v0-1
//
// Version notes:
//   - v0: the lowest version served
//   - v1: flexible versions: compact encodings and tagged fields (KIP-482)

// AlterClientQuotas: v0-1
//
// Version notes:
//   - v0: the lowest version served
//   - v1: flexible versions: compact encodings and tagged fields (KIP-482)

// The client quota admin APIs (KIP-546): quotas stored in the metadata
// log as ClientQuotaRecord. AlterClientQuotas needs ALTER_CONFIGS on the
// cluster and is forwarded to the active controller; DescribeClientQuotas
// needs DESCRIBE_CONFIGS on the cluster and reads this node's image.
func init() {
	register(kmsg.DescribeClientQuotas, 0, 1, handleDescribeClientQuotas)
	register(kmsg.AlterClientQuotas, 0, 1, handleAlterClientQuotas)
}

func handleAlterClientQuotas(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	alts := make([]controller.QuotaAlteration, len(req.Entries))
	for i, e := range req.Entries {
		for _, c := range e.Entity {
			alts[i].Entity = append(alts[i].Entity, quota.Component{Type: c.Type, Name: c.Name})
		}
		for _, op := range e.Ops {
			alts[i].Ops = append(alts[i].Ops, controller.QuotaOp{Key: op.Key, Value: op.Value, Remove: op.Remove})
		}
	}
	errs, err := b.ctrl.AlterClientQuotas(ctx, alts, req.ValidateOnly)
	for i, e := range req.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		for _, c := range e.Entity {
			rc := kmsg.NewAlterClientQuotasResponseEntryEntity()
			rc.Type, rc.Name = c.Type, c.Name
			re.Entity = append(re.Entity, rc)
		}
		ee := err
		if ee == nil {
			ee = errs[i]
		}
		re.ErrorCode, re.ErrorMessage = quotaErrCode(ee), errMessage(ee)
		resp.Entries = append(resp.Entries, re)
	}
	return resp, nil
}

// quotaErrCode maps quota.ErrInvalid to INVALID_REQUEST.
func quotaErrCode(err error) int16 {
	if errors.Is(err, quota.ErrInvalid) {
		return kerr.InvalidRequest.Code
	}
	return errCode(err)
}

func handleDescribeClientQuotas(_ context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	filter := map[string]kmsg.DescribeClientQuotasRequestComponent{}
	for _, c := range req.Components {
		if _, dup := filter[c.EntityType]; dup {
			resp.ErrorCode = kerr.InvalidRequest.Code
			resp.ErrorMessage = kmsg.StringPtr("Duplicate entity type " + c.EntityType + " in the filter")
			return resp, nil
		}
		if c.MatchType == kmsg.QuotasMatchTypeExact && c.Match == nil ||
			c.MatchType > kmsg.QuotasMatchTypeAny || c.MatchType < kmsg.QuotasMatchTypeExact {
			resp.ErrorCode = kerr.InvalidRequest.Code
			resp.ErrorMessage = kmsg.StringPtr("Invalid match for entity type " + c.EntityType)
			return resp, nil
		}
		filter[c.EntityType] = c
	}
	for _, q := range b.image().Quotas() {
		if !quotaMatches(q.Entity, filter, req.Strict) {
			continue
		}
		re := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, c := range q.Entity {
			rc := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			rc.Type, rc.Name = c.Type, c.Name
			re.Entity = append(re.Entity, rc)
		}
		for k, v := range q.Values {
			rv := kmsg.NewDescribeClientQuotasResponseEntryValue()
			rv.Key, rv.Value = k, v
			re.Values = append(re.Values, rv)
		}
		resp.Entries = append(resp.Entries, re)
	}
	return resp, nil
}

// quotaMatches reports whether entity e passes the filter: each filtered
// type present with the exact name, the default, or any name; with
// strict, no other type.
func quotaMatches(e quota.Entity, filter map[string]kmsg.DescribeClientQuotasRequestComponent, strict bool) bool {
	if strict && len(e) != len(filter) {
		return false
	}
	for typ, f := range filter {
		var c *quota.Component
		for i := range e {
			if e[i].Type == typ {
				c = &e[i]
			}
		}
		if c == nil {
			return false
		}
		switch f.MatchType {
		case kmsg.QuotasMatchTypeExact:
			if c.Name == nil || *c.Name != *f.Match {
				return false
			}
		case kmsg.QuotasMatchTypeDefault:
			if c.Name != nil {
				return false
			}
		}
	}
	return true
}
