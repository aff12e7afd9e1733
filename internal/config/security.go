package config

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// ListenerSecurity is the security of one listener: its protocol and the
// ssl.* and sasl.* properties that apply to it, each taken from
// listener.name.<listener lower case>.<property> when set, else from the
// global <property>, as Kafka resolves listener-prefixed configs
// (KafkaConfig.valuesWithPrefixOverride).
type ListenerSecurity struct {
	Listener string // listener name, upper case
	// Protocol is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
	// (listener.security.protocol.map).
	Protocol string
	SSL      SSL
	SASL     SASL
}

// TLS reports whether the listener's protocol is SSL or SASL_SSL.
func (s *ListenerSecurity) TLS() bool { return s.Protocol == "SSL" || s.Protocol == "SASL_SSL" }

// SASLEnabled reports whether the listener's protocol is SASL_PLAINTEXT or
// SASL_SSL.
func (s *ListenerSecurity) SASLEnabled() bool { return strings.HasPrefix(s.Protocol, "SASL_") }

// SSL holds the ssl.* properties Samsa serves, PEM form only (KIP-651).
type SSL struct {
	// KeystoreType is ssl.keystore.type; only PEM is served (Kafka's
	// default JKS is refused at startup naming the listener).
	KeystoreType string
	// KeystoreLocation is ssl.keystore.location: a PEM file holding the
	// private key and the certificate chain.
	KeystoreLocation string
	// KeystoreCertificateChain and KeystoreKey are
	// ssl.keystore.certificate.chain and ssl.keystore.key: the chain and
	// key as PEM text in the property itself.
	KeystoreCertificateChain string
	KeystoreKey              string
	// KeyPassword is ssl.key.password, the password of a private key
	// encrypted as PKCS#8 ("ENCRYPTED PRIVATE KEY": PBES2 with PBKDF2 and
	// AES-CBC), as Kafka's PEM keystore reads it; legacy encrypted PEM
	// ("Proc-Type: 4,ENCRYPTED") is refused, as in Kafka.
	KeyPassword string
	// TruststoreType is ssl.truststore.type; only PEM is served.
	TruststoreType string
	// TruststoreLocation and TruststoreCertificates are
	// ssl.truststore.location (a PEM file of CA certificates) and
	// ssl.truststore.certificates (the same as text). Empty both: the
	// system roots.
	TruststoreLocation     string
	TruststoreCertificates string
	// ClientAuth is ssl.client.auth: none (default), requested or required.
	ClientAuth string
	// PrincipalMappingRules is ssl.principal.mapping.rules (default
	// DEFAULT: the certificate subject's full distinguished name).
	PrincipalMappingRules string
	// EndpointIdentificationAlgorithm is
	// ssl.endpoint.identification.algorithm (default https: a client checks
	// the server's host name; empty skips that check). Used when this node
	// dials another over the listener.
	EndpointIdentificationAlgorithm string
}

// SASL holds the sasl.* properties of a listener.
type SASL struct {
	// EnabledMechanisms is sasl.enabled.mechanisms. Kafka's default is
	// GSSAPI, which Samsa does not serve; Samsa's default is
	// DefaultSASLMechanisms.
	EnabledMechanisms []string
	// JAAS maps a mechanism (upper case, e.g. PLAIN) to its
	// listener.name.<l>.<mechanism lower case>.sasl.jaas.config (or the
	// unprefixed <mechanism>.sasl.jaas.config, or sasl.jaas.config).
	JAAS map[string]string
	// MaxReauth is connections.max.reauth.ms: the longest a SASL session
	// lasts before the client must re-authenticate (KIP-368); zero (the
	// default) means no limit.
	MaxReauth time.Duration
	// MaxReceiveBytes is sasl.server.max.receive.size (default 524288, as
	// Kafka): the largest frame a connection may send before and while it
	// authenticates.
	MaxReceiveBytes int32
	// OAuthBearer validation settings (sasl.oauthbearer.*).
	OAuthJWKSURL          string   // sasl.oauthbearer.jwks.endpoint.url (file: URLs only)
	OAuthExpectedAudience []string // sasl.oauthbearer.expected.audience
	OAuthExpectedIssuer   string   // sasl.oauthbearer.expected.issuer
	OAuthSubClaim         string   // sasl.oauthbearer.sub.claim.name (default sub)
	OAuthScopeClaim       string   // sasl.oauthbearer.scope.claim.name (default scope)
	// OAuthClockSkew is sasl.oauthbearer.clock.skew.seconds (default 30 s).
	OAuthClockSkew time.Duration
}

// DefaultSASLMechanisms is Samsa's default of sasl.enabled.mechanisms.
// Kafka's is GSSAPI (Kerberos), which Samsa does not implement; Samsa
// enables the SCRAM mechanisms, whose credentials live in the metadata log
// and need no other configuration.
const DefaultSASLMechanisms = "SCRAM-SHA-256,SCRAM-SHA-512"

// SASLMechanisms are the mechanisms Samsa serves.
var SASLMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}

// securityProps are the security properties accepted globally and, with
// the listener.name.<l>. prefix, per listener.
var securityProps = map[string]string{
	"ssl.keystore.type":                         "PEM",
	"ssl.keystore.location":                     "",
	"ssl.keystore.certificate.chain":            "",
	"ssl.keystore.key":                          "",
	"ssl.keystore.password":                     "",
	"ssl.key.password":                          "",
	"ssl.truststore.type":                       "PEM",
	"ssl.truststore.location":                   "",
	"ssl.truststore.certificates":               "",
	"ssl.truststore.password":                   "",
	"ssl.client.auth":                           "none",
	"ssl.principal.mapping.rules":               "DEFAULT",
	"ssl.endpoint.identification.algorithm":     "https",
	"ssl.protocol":                              "TLSv1.3",
	"ssl.enabled.protocols":                     "TLSv1.2,TLSv1.3",
	"sasl.enabled.mechanisms":                   DefaultSASLMechanisms,
	"sasl.jaas.config":                          "",
	"sasl.mechanism.inter.broker.protocol":      "GSSAPI",
	"sasl.mechanism.controller.protocol":        "GSSAPI",
	"connections.max.reauth.ms":                 "0",
	"sasl.server.max.receive.size":              "524288",
	"sasl.oauthbearer.jwks.endpoint.url":        "",
	"sasl.oauthbearer.expected.audience":        "",
	"sasl.oauthbearer.expected.issuer":          "",
	"sasl.oauthbearer.sub.claim.name":           "sub",
	"sasl.oauthbearer.scope.claim.name":         "scope",
	"sasl.oauthbearer.clock.skew.seconds":       "30",
	"sasl.server.callback.handler.class":        "",
	"sasl.login.callback.handler.class":         "",
	"ssl.cipher.suites":                         "",
	"ssl.secure.random.implementation":          "",
	"ssl.engine.factory.class":                  "",
	"ssl.keymanager.algorithm":                  "",
	"ssl.trustmanager.algorithm":                "",
	"ssl.allow.dn.changes":                      "false",
	"ssl.allow.san.changes":                     "false",
	"sasl.kerberos.service.name":                "",
	"sasl.oauthbearer.jwks.endpoint.refresh.ms": "3600000",
}

// securityKey reports whether k is a security property: one of
// securityProps, <mechanism>.sasl.jaas.config, or either of those behind
// listener.name.<listener>.
func securityKey(k string) bool {
	if rest, ok := strings.CutPrefix(k, "listener.name."); ok {
		_, k, ok = strings.Cut(rest, ".")
		if !ok {
			return false
		}
	}
	if _, ok := securityProps[k]; ok {
		return true
	}
	mech, ok := strings.CutSuffix(k, ".sasl.jaas.config")
	return ok && slices.Contains(SASLMechanisms, strings.ToUpper(mech))
}

// securityValue is property k for listener: the listener.name.<l>. form,
// else the global one, else its default.
func (n *Node) securityValue(listener, k string) string {
	if v, ok := n.Set["listener.name."+strings.ToLower(listener)+"."+k]; ok {
		return strings.TrimSpace(v)
	}
	if v, ok := n.Set[k]; ok {
		return strings.TrimSpace(v)
	}
	return securityProps[k]
}

// Security returns the security of listener name, resolved from the
// properties; it fails on a listener without a protocol and on values it
// cannot serve (a keystore type other than PEM, an unknown mechanism or
// ssl.client.auth value), naming the listener and property.
func (n *Node) Security(name string) (*ListenerSecurity, error) {
	p, ok := n.SecurityProtocol(name)
	if !ok {
		return nil, fmt.Errorf("config listener.security.protocol.map: listener %s has no security protocol", name)
	}
	return n.security(name, p)
}

// HTTPListenerName is the listener name under which the operations HTTP
// listener's ssl.* properties are resolved: listener.name.http.ssl.*,
// then the global ssl.*.
const HTTPListenerName = "HTTP"

// HTTPSecurity returns the security of the operations HTTP listener
// (http.listener): protocol http.listener.security.protocol, PLAINTEXT or
// SSL, and the ssl.* properties as for a listener named HTTP. Errors as
// Security's.
func (n *Node) HTTPSecurity() (*ListenerSecurity, error) {
	p := n.HTTPListenerSecurityProtocol
	if p == "" {
		p = "PLAINTEXT"
	}
	return n.security(HTTPListenerName, p)
}

func (n *Node) security(name, p string) (*ListenerSecurity, error) {
	s := &ListenerSecurity{Listener: name, Protocol: p}
	v := func(k string) string { return n.securityValue(name, k) }
	bad := func(k, why string) error {
		return fmt.Errorf("config %s (listener %s): %s", k, name, why)
	}
	s.SSL = SSL{
		KeystoreType:                    strings.ToUpper(v("ssl.keystore.type")),
		KeystoreLocation:                v("ssl.keystore.location"),
		KeystoreCertificateChain:        v("ssl.keystore.certificate.chain"),
		KeystoreKey:                     v("ssl.keystore.key"),
		KeyPassword:                     v("ssl.key.password"),
		TruststoreType:                  strings.ToUpper(v("ssl.truststore.type")),
		TruststoreLocation:              v("ssl.truststore.location"),
		TruststoreCertificates:          v("ssl.truststore.certificates"),
		ClientAuth:                      strings.ToLower(v("ssl.client.auth")),
		PrincipalMappingRules:           v("ssl.principal.mapping.rules"),
		EndpointIdentificationAlgorithm: v("ssl.endpoint.identification.algorithm"),
	}
	if s.TLS() {
		if s.SSL.KeystoreType != "PEM" {
			return nil, bad("ssl.keystore.type", fmt.Sprintf("%s is not served; use PEM (KIP-651)", s.SSL.KeystoreType))
		}
		if s.SSL.TruststoreType != "PEM" {
			return nil, bad("ssl.truststore.type", fmt.Sprintf("%s is not served; use PEM (KIP-651)", s.SSL.TruststoreType))
		}
		if s.SSL.KeystoreLocation == "" && (s.SSL.KeystoreCertificateChain == "" || s.SSL.KeystoreKey == "") {
			return nil, bad("ssl.keystore.location", "a TLS listener needs a key and certificate: ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key")
		}
		if !slices.Contains([]string{"none", "requested", "required"}, s.SSL.ClientAuth) {
			return nil, bad("ssl.client.auth", fmt.Sprintf("%q is not none, requested or required", s.SSL.ClientAuth))
		}
	}
	if !s.SASLEnabled() {
		return s, nil
	}
	mechs := parseList(strings.ToUpper(v("sasl.enabled.mechanisms")))
	if len(mechs) == 0 {
		return nil, bad("sasl.enabled.mechanisms", "empty on a SASL listener")
	}
	for _, m := range mechs {
		if !slices.Contains(SASLMechanisms, m) {
			return nil, bad("sasl.enabled.mechanisms", fmt.Sprintf("mechanism %s is not served (%s)", m, strings.Join(SASLMechanisms, ", ")))
		}
	}
	s.SASL.EnabledMechanisms = mechs
	s.SASL.JAAS = map[string]string{}
	for _, m := range mechs {
		if j := v(strings.ToLower(m) + ".sasl.jaas.config"); j != "" {
			s.SASL.JAAS[m] = j
		} else if j := v("sasl.jaas.config"); j != "" {
			s.SASL.JAAS[m] = j
		}
	}
	if slices.Contains(mechs, "PLAIN") && s.SASL.JAAS["PLAIN"] == "" {
		return nil, bad("listener.name."+strings.ToLower(name)+".plain.sasl.jaas.config", "PLAIN is enabled but no users are configured (user_NAME=\"password\" entries)")
	}
	reauth, err := parseInt64(v("connections.max.reauth.ms"))
	if err != nil || reauth < 0 {
		return nil, bad("connections.max.reauth.ms", "not a non-negative number of milliseconds")
	}
	s.SASL.MaxReauth = time.Duration(reauth) * time.Millisecond
	recv, err := parseInt64(v("sasl.server.max.receive.size"))
	if err != nil || recv <= 0 || recv > math.MaxInt32 {
		return nil, bad("sasl.server.max.receive.size", "not a positive number of bytes")
	}
	s.SASL.MaxReceiveBytes = int32(recv)
	s.SASL.OAuthJWKSURL = v("sasl.oauthbearer.jwks.endpoint.url")
	s.SASL.OAuthExpectedAudience = parseList(v("sasl.oauthbearer.expected.audience"))
	s.SASL.OAuthExpectedIssuer = v("sasl.oauthbearer.expected.issuer")
	s.SASL.OAuthSubClaim = v("sasl.oauthbearer.sub.claim.name")
	s.SASL.OAuthScopeClaim = v("sasl.oauthbearer.scope.claim.name")
	skew, err := parseInt64(v("sasl.oauthbearer.clock.skew.seconds"))
	if err != nil || skew < 0 {
		return nil, bad("sasl.oauthbearer.clock.skew.seconds", "not a non-negative number of seconds")
	}
	s.SASL.OAuthClockSkew = time.Duration(skew) * time.Second
	if slices.Contains(mechs, "OAUTHBEARER") && s.SASL.OAuthJWKSURL == "" {
		return nil, bad("sasl.oauthbearer.jwks.endpoint.url", "OAUTHBEARER is enabled without a JWKS (a file: URL); unsecured tokens are not accepted")
	}
	return s, nil
}

// InterBrokerSASLMechanism is sasl.mechanism.inter.broker.protocol for
// broker-to-broker connections and sasl.mechanism.controller.protocol for
// connections to controllers (controller true), both upper case.
func (n *Node) InterBrokerSASLMechanism(controller bool) string {
	k := "sasl.mechanism.inter.broker.protocol"
	if controller {
		k = "sasl.mechanism.controller.protocol"
	}
	if v, ok := n.Set[k]; ok {
		return strings.ToUpper(strings.TrimSpace(v))
	}
	return securityProps[k]
}
