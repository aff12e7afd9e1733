package auth

import (
	"crypto/x509"
	"fmt"
	"regexp"
	"strings"
)

// PrincipalMapper turns a client certificate's subject into a Kafka user
// name with ssl.principal.mapping.rules (Kafka's SslPrincipalMapper, KIP-371):
// a comma-separated list of DEFAULT and RULE:pattern/replacement/[LU]; the
// first rule whose pattern matches the whole distinguished name (RFC 2253
// form, e.g. CN=alice,OU=eng,O=Example) gives the name, $1... refer to its
// groups, L or U lower or upper case it; DEFAULT gives the full name. No
// rule matching is an error, as in Kafka. Safe for concurrent use.
type PrincipalMapper struct {
	rules []mappingRule
}

type mappingRule struct {
	def          bool
	re           *regexp.Regexp
	replacement  string
	lower, upper bool
}

// ruleRE matches one rule as Kafka's SslPrincipalMapper.RULE_SPLITTER does:
// DEFAULT, or RULE:pattern/replacement/ with / escaped as \/ inside both,
// then an optional L or U.
var ruleRE = regexp.MustCompile(`\s*((DEFAULT)|RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU]?))\s*(,|$)`)

// ParsePrincipalMappingRules parses an ssl.principal.mapping.rules value;
// empty means DEFAULT.
func ParsePrincipalMappingRules(v string) (*PrincipalMapper, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		v = "DEFAULT"
	}
	m := &PrincipalMapper{}
	for rest := v; rest != ""; {
		loc := ruleRE.FindStringSubmatchIndex(rest)
		if loc == nil || loc[0] != 0 {
			return nil, fmt.Errorf("ssl.principal.mapping.rules: invalid rule at %q", rest)
		}
		sub := func(i int) string {
			if loc[2*i] < 0 {
				return ""
			}
			return rest[loc[2*i]:loc[2*i+1]]
		}
		if sub(2) == "DEFAULT" {
			m.rules = append(m.rules, mappingRule{def: true})
		} else {
			pat := strings.ReplaceAll(sub(3), `\/`, "/")
			re, err := regexp.Compile("^(?:" + pat + ")$")
			if err != nil {
				return nil, fmt.Errorf("ssl.principal.mapping.rules: rule %q: %w", sub(1), err)
			}
			repl := strings.ReplaceAll(sub(4), `\/`, "/")
			// Java's $1 is Go's ${1}: $1x would otherwise name group "1x".
			repl = regexp.MustCompile(`\$(\d+)`).ReplaceAllString(repl, "$${$1}")
			m.rules = append(m.rules, mappingRule{re: re, replacement: repl, lower: sub(5) == "L", upper: sub(5) == "U"})
		}
		rest = rest[loc[1]:]
	}
	return m, nil
}

// Name maps a distinguished name to the user name.
func (m *PrincipalMapper) Name(dn string) (string, error) {
	for _, r := range m.rules {
		if r.def {
			return dn, nil
		}
		idx := r.re.FindStringSubmatchIndex(dn)
		if idx == nil {
			continue
		}
		out := string(r.re.ExpandString(nil, r.replacement, dn, idx))
		switch {
		case r.lower:
			out = strings.ToLower(out)
		case r.upper:
			out = strings.ToUpper(out)
		}
		return out, nil
	}
	return "", fmt.Errorf("no ssl.principal.mapping.rules rule matches %q", dn)
}

// CertificatePrincipal is the principal of a client certificate: "User:"
// and the mapped name of its subject.
func (m *PrincipalMapper) CertificatePrincipal(c *x509.Certificate) (string, error) {
	name, err := m.Name(c.Subject.String())
	if err != nil {
		return "", err
	}
	return "User:" + name, nil
}
