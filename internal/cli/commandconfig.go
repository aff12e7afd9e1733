package cli

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsahq/samsa/internal/auth"
	"github.com/samsahq/samsa/internal/config"
)

// commandConfigKeys are the client properties --command-config reads, as
// Kafka's tools take them (--command-config, --producer.config), with
// librdkafka's sasl.username/sasl.password as a shorter form of the JAAS
// line, and sasl.oauthbearer.token (Samsa's) for a ready-made token.
var commandConfigKeys = map[string]bool{
	"security.protocol":                     true,
	"sasl.mechanism":                        true,
	"sasl.username":                         true,
	"sasl.password":                         true,
	"sasl.jaas.config":                      true,
	"sasl.oauthbearer.token":                true,
	"ssl.truststore.type":                   true,
	"ssl.truststore.location":               true,
	"ssl.truststore.certificates":           true,
	"ssl.keystore.type":                     true,
	"ssl.keystore.location":                 true,
	"ssl.keystore.certificate.chain":        true,
	"ssl.keystore.key":                      true,
	"ssl.key.password":                      true,
	"ssl.endpoint.identification.algorithm": true,
	"client.id":                             true,
}

// commandConfig reads a client properties file and returns the kgo options
// it asks for: TLS for SSL and SASL_SSL, a SASL mechanism for SASL_*.
// Errors name the file and the property.
func commandConfig(path string) ([]kgo.Opt, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--command-config: %w", err)
	}
	defer f.Close()
	props, err := config.ReadProperties(f)
	if err != nil {
		return nil, fmt.Errorf("--command-config %s: %w", path, err)
	}
	return clientSecurity(props, path)
}

func clientSecurity(props map[string]string, path string) ([]kgo.Opt, error) {
	var unknown []string
	for k := range props {
		if !commandConfigKeys[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("--command-config %s: unknown client properties %s", path, strings.Join(unknown, ", "))
	}
	get := func(k string) string { return strings.TrimSpace(props[k]) }
	bad := func(k, why string) error { return fmt.Errorf("--command-config %s: %s: %s", path, k, why) }
	var opts []kgo.Opt
	if id := get("client.id"); id != "" {
		opts = append(opts, kgo.ClientID(id))
	}
	proto := strings.ToUpper(get("security.protocol"))
	switch proto {
	case "", "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL":
	default:
		return nil, bad("security.protocol", fmt.Sprintf("%q is not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", proto))
	}
	if proto == "SSL" || proto == "SASL_SSL" {
		for _, k := range []string{"ssl.truststore.type", "ssl.keystore.type"} {
			if t := get(k); t != "" && !strings.EqualFold(t, "PEM") {
				return nil, bad(k, t+" is not served; use PEM files")
			}
		}
		ssl := config.SSL{
			KeystoreLocation:                get("ssl.keystore.location"),
			KeystoreCertificateChain:        get("ssl.keystore.certificate.chain"),
			KeystoreKey:                     get("ssl.keystore.key"),
			KeyPassword:                     get("ssl.key.password"),
			TruststoreLocation:              get("ssl.truststore.location"),
			TruststoreCertificates:          get("ssl.truststore.certificates"),
			EndpointIdentificationAlgorithm: "https",
		}
		if v, ok := props["ssl.endpoint.identification.algorithm"]; ok {
			ssl.EndpointIdentificationAlgorithm = strings.TrimSpace(v)
		}
		tc, err := auth.ClientTLS(ssl, "")
		if err != nil {
			return nil, fmt.Errorf("--command-config %s: %w", path, err)
		}
		// The server name is each broker's host, set per dial.
		opts = append(opts, kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			c := tc.Clone()
			if c.ServerName == "" {
				if h, _, err := net.SplitHostPort(host); err == nil {
					c.ServerName = h
				}
			}
			d := &tls.Dialer{Config: c}
			return d.DialContext(ctx, network, host)
		}))
	}
	if proto != "SASL_PLAINTEXT" && proto != "SASL_SSL" {
		return opts, nil
	}
	mech := strings.ToUpper(get("sasl.mechanism"))
	if mech == "" {
		mech = "GSSAPI" // Kafka's default, refused below
	}
	user, pass := get("sasl.username"), get("sasl.password")
	if j := get("sasl.jaas.config"); j != "" {
		jo, err := auth.ParseJAAS(j)
		if err != nil {
			return nil, bad("sasl.jaas.config", err.Error())
		}
		if user == "" {
			user = jo["username"]
		}
		if pass == "" {
			pass = jo["password"]
		}
	}
	tok := get("sasl.oauthbearer.token")
	if mech == "OAUTHBEARER" && tok == "" {
		return nil, bad("sasl.oauthbearer.token", "OAUTHBEARER needs a token")
	}
	m, err := auth.ClientMechanism(mech, user, pass, tok)
	if err != nil {
		return nil, bad("sasl.mechanism", err.Error())
	}
	if mech != "OAUTHBEARER" && (user == "" || pass == "") {
		return nil, bad("sasl.username", "SASL "+mech+" needs sasl.username and sasl.password (or sasl.jaas.config with username and password)")
	}
	return append(opts, kgo.SASL(m)), nil
}
