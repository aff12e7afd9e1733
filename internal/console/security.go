package console

import (
	"context"
	"net/http"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
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
