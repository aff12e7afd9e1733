package console

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SecurityView is /api/security: SCRAM users, ACLs and client quotas, as
// far as the principal may describe them (each part's error says why not).
type SecurityView struct {
	Users  []ScramUser `json:"users"`
	ACLs   []ACL       `json:"acls"`
	Quotas []Quota     `json:"quotas"`
	Errors []string    `json:"errors,omitempty"`
}

// ScramUser is a user's SCRAM credentials (mechanism and iterations; never
// a secret).
type ScramUser struct {
	User        string   `json:"user"`
	Credentials []string `json:"credentials"` // SCRAM-SHA-256/4096, ...
}

// ACL is an access control entry.
type ACL struct {
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	ResourceType string `json:"resourceType"`
	Resource     string `json:"resource"`
	Pattern      string `json:"pattern"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
}

// Quota is one entity's client quotas.
type Quota struct {
	Entity string             `json:"entity"`
	Values map[string]float64 `json:"values"`
}

func (c *Console) getSecurity(ctx context.Context, s *session, _ *http.Request) (any, error) {
	adm := kadm.NewClient(s.cl)
	v := SecurityView{Users: []ScramUser{}, ACLs: []ACL{}, Quotas: []Quota{}}
	fail := func(what string, err error) { v.Errors = append(v.Errors, what+": "+err.Error()) }
	if us, err := adm.DescribeUserSCRAMs(ctx); err != nil {
		fail("DescribeUserScramCredentials", err)
	} else {
		for _, u := range us.Sorted() {
			su := ScramUser{User: u.User}
			for _, ci := range u.CredInfos {
				su.Credentials = append(su.Credentials, ci.Mechanism.String())
			}
			v.Users = append(v.Users, su)
		}
	}
	b := kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny).Allow().Deny().AllowHosts().DenyHosts()
	if rs, err := adm.DescribeACLs(ctx, b); err != nil {
		fail("DescribeAcls", err)
	} else {
		for _, r := range rs {
			if r.Err != nil {
				fail("DescribeAcls", r.Err)
				continue
			}
			for _, d := range r.Described {
				v.ACLs = append(v.ACLs, ACL{Principal: d.Principal, Host: d.Host, ResourceType: d.Type.String(), Resource: d.Name, Pattern: d.Pattern.String(), Operation: d.Operation.String(), Permission: d.Permission.String()})
			}
		}
		sort.Slice(v.ACLs, func(i, j int) bool {
			return v.ACLs[i].Principal+v.ACLs[i].Resource < v.ACLs[j].Principal+v.ACLs[j].Resource
		})
	}
	if qs, err := adm.DescribeClientQuotas(ctx, false, nil); err != nil {
		fail("DescribeClientQuotas", err)
	} else {
		for _, q := range qs {
			e := ""
			for _, ec := range q.Entity {
				if e != "" {
					e += ","
				}
				name := "<default>"
				if ec.Name != nil {
					name = *ec.Name
				}
				e += ec.Type + "=" + name
			}
			qv := Quota{Entity: e, Values: map[string]float64{}}
			for _, val := range q.Values {
				qv.Values[val.Key] = val.Value
			}
			v.Quotas = append(v.Quotas, qv)
		}
	}
	return v, nil
}

// aclParams parses an ACL from a form: principal (User:alice), host
// (default *), resourceType (TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID,
// DELEGATION_TOKEN), resource, pattern (LITERAL or PREFIXED), operation
// (READ, WRITE, ...), permission (ALLOW or DENY).
func aclParams(v url.Values) (ACL, kmsg.ACLResourceType, kmsg.ACLResourcePatternType, kmsg.ACLOperation, kmsg.ACLPermissionType, error) {
	a := ACL{Principal: v.Get("principal"), Host: v.Get("host"), ResourceType: v.Get("resourceType"), Resource: v.Get("resource"),
		Pattern: v.Get("pattern"), Operation: v.Get("operation"), Permission: v.Get("permission")}
	if a.Host == "" {
		a.Host = "*"
	}
	if a.Pattern == "" {
		a.Pattern = "LITERAL"
	}
	if a.ResourceType == "CLUSTER" && a.Resource == "" {
		a.Resource = "kafka-cluster"
	}
	fail := func(err error) (ACL, kmsg.ACLResourceType, kmsg.ACLResourcePatternType, kmsg.ACLOperation, kmsg.ACLPermissionType, error) {
		return a, 0, 0, 0, 0, fmt.Errorf("%w: %v", errBadRequest, err)
	}
	if err := need(v, "principal", "resourceType", "operation", "permission"); err != nil {
		return a, 0, 0, 0, 0, err
	}
	if !strings.Contains(a.Principal, ":") || a.Resource == "" {
		return fail(fmt.Errorf("principal %q (Type:name) and a resource name are required", a.Principal))
	}
	rt, err := kmsg.ParseACLResourceType(a.ResourceType)
	if err != nil {
		return fail(err)
	}
	pt, err := kmsg.ParseACLResourcePatternType(a.Pattern)
	if err != nil {
		return fail(err)
	}
	op, err := kmsg.ParseACLOperation(a.Operation)
	if err != nil {
		return fail(err)
	}
	perm, err := kmsg.ParseACLPermissionType(a.Permission)
	if err != nil {
		return fail(err)
	}
	return a, rt, pt, op, perm, nil
}

func (a ACL) String() string {
	return fmt.Sprintf("%s %s %s on %s %s %q from host %s", a.Permission, a.Principal, a.Operation, a.Pattern, a.ResourceType, a.Resource, a.Host)
}

func scramMechanism(v url.Values) (kadm.ScramMechanism, error) {
	switch v.Get("mechanism") {
	case "SCRAM-SHA-256":
		return kadm.ScramSha256, nil
	case "SCRAM-SHA-512", "":
		return kadm.ScramSha512, nil
	}
	return 0, fmt.Errorf("%w: mechanism %q (SCRAM-SHA-256 or SCRAM-SHA-512)", errBadRequest, v.Get("mechanism"))
}

// quotaParams parses entityType (user, client-id, ip), entity (empty: the
// default entity), key (producer_byte_rate, ...) and value.
func quotaParams(v url.Values) (kadm.ClientQuotaEntity, kadm.AlterClientQuotaOp, error) {
	if err := need(v, "entityType", "key"); err != nil {
		return nil, kadm.AlterClientQuotaOp{}, err
	}
	ec := kadm.ClientQuotaEntityComponent{Type: v.Get("entityType")}
	if name := v.Get("entity"); name != "" {
		ec.Name = &name
	}
	op := kadm.AlterClientQuotaOp{Key: v.Get("key"), Remove: v.Get("op") == "delete"}
	if !op.Remove {
		f, err := strconv.ParseFloat(v.Get("value"), 64)
		if err != nil {
			return nil, op, fmt.Errorf("%w: value %q", errBadRequest, v.Get("value"))
		}
		op.Value = f
	}
	return kadm.ClientQuotaEntity{ec}, op, nil
}

func init() {
	actions["upsert-user"] = action{
		plan: func(_ context.Context, _ *Console, _ *session, v url.Values) (string, any, error) {
			m, err := scramMechanism(v)
			if err == nil {
				err = need(v, "user", "password")
			}
			return fmt.Sprintf("Set the %s credential of user %q (%s iterations), replacing any it has.", m, v.Get("user"), cmp.Or(v.Get("iterations"), "4096")), nil, err
		},
		do: func(ctx context.Context, _ *Console, s *session, v url.Values) (string, string, error) {
			m, _ := scramMechanism(v)
			it, err := intParam(v, "iterations", 4096, 4096, 16384)
			if err != nil {
				return "", "", err
			}
			rs, err := kadm.NewClient(s.cl).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: v.Get("user"), Mechanism: m, Iterations: int32(it), Password: v.Get("password")}})
			if err == nil {
				err = rs.Error()
			}
			return "Set the credential of " + v.Get("user") + ".", "/security", err
		},
	}
	actions["delete-user"] = action{
		plan: func(_ context.Context, _ *Console, _ *session, v url.Values) (string, any, error) {
			m, err := scramMechanism(v)
			if err == nil {
				err = need(v, "user")
			}
			return fmt.Sprintf("Delete the %s credential of user %q: it can no longer log in with it.", m, v.Get("user")), nil, err
		},
		do: func(ctx context.Context, _ *Console, s *session, v url.Values) (string, string, error) {
			m, _ := scramMechanism(v)
			rs, err := kadm.NewClient(s.cl).AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: v.Get("user"), Mechanism: m}}, nil)
			if err == nil {
				err = rs.Error()
			}
			return "Deleted the credential of " + v.Get("user") + ".", "/security", err
		},
	}
	actions["create-acl"] = action{
		plan: func(_ context.Context, _ *Console, _ *session, v url.Values) (string, any, error) {
			a, _, _, _, _, err := aclParams(v)
			return "Add the ACL: " + a.String() + ".", nil, err
		},
		do: func(ctx context.Context, _ *Console, s *session, v url.Values) (string, string, error) {
			a, rt, pt, op, perm, _ := aclParams(v)
			req := kmsg.NewPtrCreateACLsRequest()
			cr := kmsg.NewCreateACLsRequestCreation()
			cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = rt, a.Resource, pt
			cr.Principal, cr.Host, cr.Operation, cr.PermissionType = a.Principal, a.Host, op, perm
			req.Creations = append(req.Creations, cr)
			resp, err := req.RequestWith(ctx, s.cl)
			if err == nil && len(resp.Results) == 1 {
				if err = kerr.ErrorForCode(resp.Results[0].ErrorCode); err != nil && resp.Results[0].ErrorMessage != nil {
					err = fmt.Errorf("%w: %s", err, *resp.Results[0].ErrorMessage)
				}
			}
			return "Added the ACL.", "/security", err
		},
	}
	actions["delete-acl"] = action{
		plan: func(_ context.Context, _ *Console, _ *session, v url.Values) (string, any, error) {
			a, _, _, _, _, err := aclParams(v)
			return "Remove the ACL: " + a.String() + ".", nil, err
		},
		do: func(ctx context.Context, _ *Console, s *session, v url.Values) (string, string, error) {
			a, rt, pt, op, perm, _ := aclParams(v)
			req := kmsg.NewPtrDeleteACLsRequest()
			f := kmsg.NewDeleteACLsRequestFilter()
			f.ResourceType, f.ResourceName, f.ResourcePatternType = rt, &a.Resource, pt
			f.Principal, f.Host, f.Operation, f.PermissionType = &a.Principal, &a.Host, op, perm
			req.Filters = append(req.Filters, f)
			resp, err := req.RequestWith(ctx, s.cl)
			n := 0
			if err == nil && len(resp.Results) == 1 {
				err = kerr.ErrorForCode(resp.Results[0].ErrorCode)
				n = len(resp.Results[0].MatchingACLs)
			}
			return fmt.Sprintf("Removed %d ACLs.", n), "/security", err
		},
	}
	actions["alter-quota"] = action{
		plan: func(_ context.Context, _ *Console, _ *session, v url.Values) (string, any, error) {
			e, op, err := quotaParams(v)
			if err != nil {
				return "", nil, err
			}
			if op.Remove {
				return fmt.Sprintf("Remove the quota %s of %s.", op.Key, e[0]), nil, nil
			}
			return fmt.Sprintf("Set the quota %s=%g on %s.", op.Key, op.Value, e[0]), nil, nil
		},
		do: func(ctx context.Context, _ *Console, s *session, v url.Values) (string, string, error) {
			e, op, _ := quotaParams(v)
			rs, err := kadm.NewClient(s.cl).AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: e, Ops: []kadm.AlterClientQuotaOp{op}}})
			if err == nil {
				for _, r := range rs {
					if r.Err != nil {
						err = fmt.Errorf("%w: %s", r.Err, r.ErrMessage)
					}
				}
			}
			return "Updated the quota.", "/security", err
		},
	}
}
