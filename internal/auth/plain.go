package auth

import (
	"bytes"
	"crypto/subtle"
	"fmt"
	"time"
)

// plainExchange is SASL PLAIN (RFC 4616): one client message
// [authzid] NUL authcid NUL passwd, checked against the JAAS users.
type plainExchange struct {
	users     map[string]string
	principal string
}

// ParsePlain splits a PLAIN message into its authorization id, user and
// password; it fails unless there are exactly two NULs and a user and
// password.
func ParsePlain(msg []byte) (authzid, user, password string, err error) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return "", "", "", fmt.Errorf("%w: invalid SASL/PLAIN message: expected 3 tokens", ErrAuthentication)
	}
	if len(parts[1]) == 0 || len(parts[2]) == 0 {
		return "", "", "", fmt.Errorf("%w: SASL/PLAIN: username and password must not be empty", ErrAuthentication)
	}
	return string(parts[0]), string(parts[1]), string(parts[2]), nil
}

func (p *plainExchange) Step(in []byte) ([]byte, bool, error) {
	if p.principal != "" {
		return nil, false, fmt.Errorf("%w: SASL/PLAIN exchange already complete", ErrAuthentication)
	}
	authzid, user, password, err := ParsePlain(in)
	if err != nil {
		return nil, false, err
	}
	if authzid != "" && authzid != user {
		return nil, false, fmt.Errorf("%w: authorization id %q differs from the user name", ErrAuthentication, authzid)
	}
	want, ok := p.users[user]
	// Compare even for an unknown user, so timing does not tell users apart.
	eq := subtle.ConstantTimeCompare([]byte(want), []byte(password)) == 1
	if !ok || !eq {
		return nil, false, fmt.Errorf("%w: invalid username or password", ErrAuthentication)
	}
	p.principal = "User:" + user
	return []byte{}, true, nil
}

func (p *plainExchange) Principal() string { return p.principal }
func (p *plainExchange) Expiry() time.Time { return time.Time{} }
