package controller

import (
	"context"
	"errors"
	"fmt"

	"github.com/samsahq/samsa/internal/auth"
	"github.com/samsahq/samsa/internal/metadata"
)

// Errors of AlterUserScramCredentials (KIP-554), mapped to Kafka's codes.
var (
	ErrUnacceptableCredential = errors.New("unacceptable credential")    // UNACCEPTABLE_CREDENTIAL
	ErrDuplicateResource      = errors.New("duplicate resource")         // DUPLICATE_RESOURCE
	ErrResourceNotFound       = errors.New("resource not found")         // RESOURCE_NOT_FOUND
	ErrUnsupportedMechanism   = errors.New("unsupported SASL mechanism") // UNSUPPORTED_SASL_MECHANISM
)

// ScramDeletion removes a user's credential of one mechanism.
type ScramDeletion struct {
	Name      string
	Mechanism int8
}

// ScramUpsertion sets a user's credential of one mechanism from the salted
// password the client computed (AlterUserScramCredentials carries the salt,
// Hi(password, salt, iterations) and the iterations, never the password).
type ScramUpsertion struct {
	Name           string
	Mechanism      int8
	Iterations     int32
	Salt           []byte
	SaltedPassword []byte
}

// AlterUserScramCredentials applies deletions and upsertions as Kafka's
// ScramControlManager does: each user succeeds or fails as a whole, with the
// first error of its alterations (an empty name, an unknown mechanism, a
// user and mechanism named twice, iterations outside [4096, 16384], deleting
// a credential that does not exist). It returns one error (nil: applied)
// per user name, and an error when nothing could be written.
func (c *Controller) AlterUserScramCredentials(ctx context.Context, dels []ScramDeletion, ups []ScramUpsertion) (map[string]error, error) {
	var results map[string]error
	err := c.write(ctx, func(im *metadata.Image) ([]metadata.Record, error) {
		var recs []metadata.Record
		results, recs = scramRecords(im, dels, ups)
		return recs, nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// scramRecords checks the alterations over im: one result per user and
// the records of the users that succeed.
func scramRecords(im *metadata.Image, dels []ScramDeletion, ups []ScramUpsertion) (map[string]error, []metadata.Record) {
	results := map[string]error{}
	recsBy := map[string][]metadata.Record{}
	seen := map[metadata.ScramKey]bool{}
	check := func(name string, mech int8) error {
		if name == "" {
			return fmt.Errorf("%w: username must not be empty", ErrUnacceptableCredential)
		}
		if auth.ScramMechanismName(mech) == "" {
			return fmt.Errorf("%w: unknown SCRAM mechanism %d", ErrUnsupportedMechanism, mech)
		}
		k := metadata.ScramKey{Name: name, Mechanism: mech}
		if seen[k] {
			return fmt.Errorf("%w: a user credential cannot be altered twice in the same request", ErrDuplicateResource)
		}
		seen[k] = true
		return nil
	}
	fail := func(name string, err error) {
		if results[name] == nil {
			results[name] = err
		}
	}
	note := func(name string) {
		if _, ok := results[name]; !ok {
			results[name] = nil // every user named gets a result
		}
	}
	for _, d := range dels {
		note(d.Name)
		if err := check(d.Name, d.Mechanism); err != nil {
			fail(d.Name, err)
			continue
		}
		if _, ok := im.ScramCredential(d.Mechanism, d.Name); !ok {
			fail(d.Name, fmt.Errorf("%w: attempt to delete a user credential that does not exist", ErrResourceNotFound))
			continue
		}
		recsBy[d.Name] = append(recsBy[d.Name], metadata.RemoveUserScramCredentialRecord{Name: d.Name, Mechanism: d.Mechanism})
	}
	for _, u := range ups {
		note(u.Name)
		if err := check(u.Name, u.Mechanism); err != nil {
			fail(u.Name, err)
			continue
		}
		switch {
		case u.Iterations < auth.MinScramIterations:
			fail(u.Name, fmt.Errorf("%w: too few iterations", ErrUnacceptableCredential))
			continue
		case u.Iterations > auth.MaxScramIterations:
			fail(u.Name, fmt.Errorf("%w: too many iterations", ErrUnacceptableCredential))
			continue
		case len(u.Salt) == 0 || len(u.SaltedPassword) == 0:
			fail(u.Name, fmt.Errorf("%w: empty salt or salted password", ErrUnacceptableCredential))
			continue
		}
		cred := auth.CredentialFromSalted(u.Mechanism, u.SaltedPassword, u.Salt, u.Iterations)
		recsBy[u.Name] = append(recsBy[u.Name], metadata.UserScramCredentialRecord{
			Name: u.Name, Mechanism: u.Mechanism, Salt: cred.Salt, StoredKey: cred.StoredKey, ServerKey: cred.ServerKey, Iterations: cred.Iterations,
		})
	}
	var recs []metadata.Record
	for name, err := range results {
		if err == nil {
			recs = append(recs, recsBy[name]...)
		}
	}
	return results, recs
}
