package auth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"

	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/samsahq/samsa/internal/config"
)

// oauthValidator checks OAUTHBEARER tokens as Kafka's
// OAuthBearerValidatorCallbackHandler (KIP-768) does: a JWS signed by a key
// of the JWKS at sasl.oauthbearer.jwks.endpoint.url (file: URLs only, the
// file re-read at each authentication so rotated keys apply at once), not
// expired (sasl.oauthbearer.clock.skew.seconds of leeway), with the
// expected audience and issuer when configured, and a subject in
// sasl.oauthbearer.sub.claim.name.
type oauthValidator struct {
	jwksPath string
	audience []string
	issuer   string
	subClaim string
	skew     time.Duration
	now      func() time.Time
}

// oauthAlgorithms are the JWS algorithms accepted (asymmetric only, as
// Kafka's validator with a JWKS).
var oauthAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.ES256, jose.ES384, jose.ES512, jose.PS256, jose.PS384, jose.PS512, jose.EdDSA}

func newOAuthValidator(s config.SASL) (*oauthValidator, error) {
	u, err := url.Parse(s.OAuthJWKSURL)
	if err != nil || u.Scheme != "file" || u.Path == "" {
		return nil, fmt.Errorf("sasl.oauthbearer.jwks.endpoint.url %q: only file: URLs are served", s.OAuthJWKSURL)
	}
	v := &oauthValidator{jwksPath: u.Path, audience: s.OAuthExpectedAudience, issuer: s.OAuthExpectedIssuer, subClaim: s.OAuthSubClaim, skew: s.OAuthClockSkew, now: time.Now}
	if v.subClaim == "" {
		v.subClaim = "sub"
	}
	if _, err := v.keys(); err != nil {
		return nil, err
	}
	return v, nil
}

func (v *oauthValidator) keys() (*jose.JSONWebKeySet, error) {
	data, err := os.ReadFile(v.jwksPath)
	if err != nil {
		return nil, fmt.Errorf("sasl.oauthbearer.jwks.endpoint.url: %w", err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("sasl.oauthbearer.jwks.endpoint.url %s: %w", v.jwksPath, err)
	}
	return &set, nil
}

// validate returns the token's subject and expiry.
func (v *oauthValidator) validate(token string) (string, time.Time, error) {
	tok, err := jwt.ParseSigned(token, oauthAlgorithms)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("%w: invalid token: %v", ErrAuthentication, err)
	}
	set, err := v.keys()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("%w: %v", ErrAuthentication, err)
	}
	var candidates []jose.JSONWebKey
	if kid := tok.Headers[0].KeyID; kid != "" {
		candidates = set.Key(kid)
	} else {
		candidates = set.Keys
	}
	var claims jwt.Claims
	var all map[string]any
	verified := false
	for _, k := range candidates {
		if k.IsPublic() || k.Key != nil {
			if err := tok.Claims(k.Public().Key, &claims, &all); err == nil {
				verified = true
				break
			}
		}
	}
	if !verified {
		return "", time.Time{}, fmt.Errorf("%w: invalid token: no key of the JWKS verifies its signature", ErrAuthentication)
	}
	if claims.Expiry == nil {
		return "", time.Time{}, fmt.Errorf("%w: invalid token: no exp claim", ErrAuthentication)
	}
	exp := jwt.Expected{Issuer: v.issuer, AnyAudience: v.audience, Time: v.now()}
	if err := claims.ValidateWithLeeway(exp, v.skew); err != nil {
		return "", time.Time{}, fmt.Errorf("%w: invalid token: %v", ErrAuthentication, err)
	}
	sub, _ := all[v.subClaim].(string)
	if sub == "" {
		return "", time.Time{}, fmt.Errorf("%w: invalid token: no %s claim", ErrAuthentication, v.subClaim)
	}
	return sub, claims.Expiry.Time(), nil
}

// ParseOAuthBearer parses an OAUTHBEARER client message (RFC 7628 section
// 3.1): a GS2 header "n,[a=authzid]," then ^A-separated key=value pairs
// ending with ^A^A, of which auth is "Bearer <token>". It returns the token
// and the other pairs (SASL extensions, KIP-342).
func ParseOAuthBearer(msg []byte) (token string, ext map[string]string, err error) {
	bad := func(why string) (string, map[string]string, error) {
		return "", nil, fmt.Errorf("%w: invalid OAUTHBEARER message: %s", ErrAuthentication, why)
	}
	gs2, rest, ok := bytes.Cut(msg, []byte{1})
	if !ok {
		return bad("no ^A after the GS2 header")
	}
	parts := strings.Split(string(gs2), ",")
	if len(parts) != 3 || parts[0] != "n" && parts[0] != "y" || parts[2] != "" || parts[1] != "" && !strings.HasPrefix(parts[1], "a=") {
		return bad("GS2 header is not n,[a=authzid],")
	}
	body, ok := bytes.CutSuffix(rest, []byte{1, 1})
	if !ok {
		return bad("not terminated by ^A^A")
	}
	ext = map[string]string{}
	for _, kv := range strings.Split(string(body), "\x01") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return bad("pair without key=value")
		}
		if _, dup := ext[k]; dup {
			return bad("key " + k + " twice")
		}
		ext[k] = v
	}
	auth, ok := ext["auth"]
	delete(ext, "auth")
	if !ok {
		return bad("no auth pair")
	}
	scheme, tok, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return bad("auth is not Bearer <token>")
	}
	return strings.TrimSpace(tok), ext, nil
}

// oauthExchange is OAUTHBEARER: one client message, answered with nothing
// on success.
type oauthExchange struct {
	v         *oauthValidator
	principal string
	expiry    time.Time
}

var errOAuthDone = errors.New("OAUTHBEARER exchange already complete")

func (o *oauthExchange) Step(in []byte) ([]byte, bool, error) {
	if o.principal != "" {
		return nil, false, fmt.Errorf("%w: %v", ErrAuthentication, errOAuthDone)
	}
	tok, _, err := ParseOAuthBearer(in)
	if err != nil {
		return nil, false, err
	}
	sub, exp, err := o.v.validate(tok)
	if err != nil {
		return nil, false, err
	}
	o.principal, o.expiry = "User:"+sub, exp
	return []byte{}, true, nil
}

func (o *oauthExchange) Principal() string { return o.principal }
func (o *oauthExchange) Expiry() time.Time { return o.expiry }
