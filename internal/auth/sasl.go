package auth

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/samsahq/samsa/internal/config"
)

// ErrAuthentication is a failed SASL exchange: bad credentials, an unknown
// user, an expired or invalid token, a malformed message. Server answers it
// with SASL_AUTHENTICATION_FAILED and closes the connection, as Kafka does.
var ErrAuthentication = errors.New("authentication failed")

// Exchange is the server side of one SASL authentication.
type Exchange interface {
	// Step takes the client's next message and returns the server's
	// answer; done reports that the exchange succeeded. An error wraps
	// ErrAuthentication; out, when not nil, is still sent (SCRAM's e=...).
	Step(in []byte) (out []byte, done bool, err error)
	// Principal is the authenticated principal, "User:NAME", once done.
	Principal() string
	// Expiry is when the credential stops being valid (a token's exp);
	// zero when it does not expire.
	Expiry() time.Time
}

// ScramCredentials looks up the stored SCRAM credential of a user for a
// mechanism (SCRAM-SHA-256 or SCRAM-SHA-512); false when there is none.
type ScramCredentials func(mechanism, user string) (ScramCredential, bool)

// Authenticator starts the SASL exchanges of one listener. Safe for
// concurrent use.
type Authenticator struct {
	mechanisms []string
	plain      map[string]string // PLAIN user -> password
	scram      ScramCredentials
	oauth      *oauthValidator
}

// NewAuthenticator returns the authenticator of a listener's sasl.*
// settings; scram serves the SCRAM mechanisms (nil: no user exists).
func NewAuthenticator(s config.SASL, scram ScramCredentials) (*Authenticator, error) {
	a := &Authenticator{mechanisms: s.EnabledMechanisms, scram: scram}
	if a.scram == nil {
		a.scram = func(string, string) (ScramCredential, bool) { return ScramCredential{}, false }
	}
	if slices.Contains(s.EnabledMechanisms, "PLAIN") {
		opts, err := ParseJAAS(s.JAAS["PLAIN"])
		if err != nil {
			return nil, fmt.Errorf("plain.sasl.jaas.config: %w", err)
		}
		a.plain = PlainUsers(opts)
	}
	if slices.Contains(s.EnabledMechanisms, "OAUTHBEARER") {
		v, err := newOAuthValidator(s)
		if err != nil {
			return nil, err
		}
		a.oauth = v
	}
	return a, nil
}

// Mechanisms are the enabled mechanisms, as SaslHandshake lists them.
func (a *Authenticator) Mechanisms() []string { return a.mechanisms }

// Start begins an exchange of mechanism; false when it is not enabled.
func (a *Authenticator) Start(mechanism string) (Exchange, bool) {
	if !slices.Contains(a.mechanisms, mechanism) {
		return nil, false
	}
	switch mechanism {
	case "PLAIN":
		return &plainExchange{users: a.plain}, true
	case "SCRAM-SHA-256", "SCRAM-SHA-512":
		return newScramExchange(mechanism, a.scram), true
	case "OAUTHBEARER":
		return &oauthExchange{v: a.oauth}, true
	}
	return nil, false
}
