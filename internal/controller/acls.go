package controller

import (
	"context"
	"crypto/rand"

	"github.com/samsahq/samsa/internal/acl"
	"github.com/samsahq/samsa/internal/metadata"
)

// CreateACLs adds bindings (CreateAcls, KIP-140), one error per binding:
// acl.ErrInvalid for a binding Validate refuses. A binding equal to one
// already stored succeeds without a new record, as Kafka's AclControlManager.
// The valid bindings are committed in one batch.
func (c *Controller) CreateACLs(ctx context.Context, bs []acl.Binding) ([]error, error) {
	errs := make([]error, len(bs))
	err := c.write(ctx, func(im *metadata.Image) ([]metadata.Record, error) {
		existing := map[acl.Binding]bool{}
		im.ACLs(func(_ metadata.UUID, b acl.Binding) bool {
			existing[b] = true
			return true
		})
		var recs []metadata.Record
		for i, b := range bs {
			if errs[i] = b.Validate(); errs[i] != nil || existing[b] {
				continue
			}
			existing[b] = true
			var id metadata.UUID
			rand.Read(id[:])
			recs = append(recs, metadata.AccessControlEntryRecord{ID: id, Binding: b})
		}
		return recs, nil
	})
	return errs, err
}

// DeleteACLs removes the bindings each filter matches (DeleteAcls,
// KIP-140) and returns them per filter; a binding two filters match is
// removed once and reported under each. An invalid filter gets
// acl.ErrInvalid and deletes nothing. The removals are committed in one
// batch.
func (c *Controller) DeleteACLs(ctx context.Context, filters []acl.Filter) ([][]acl.Binding, []error, error) {
	matched := make([][]acl.Binding, len(filters))
	errs := make([]error, len(filters))
	err := c.write(ctx, func(im *metadata.Image) ([]metadata.Record, error) {
		removed := map[metadata.UUID]bool{}
		var recs []metadata.Record
		for i, f := range filters {
			if errs[i] = f.Validate(); errs[i] != nil {
				continue
			}
			im.ACLs(func(id metadata.UUID, b acl.Binding) bool {
				if f.Matches(b) {
					matched[i] = append(matched[i], b)
					if !removed[id] {
						removed[id] = true
						recs = append(recs, metadata.RemoveAccessControlEntryRecord{ID: id})
					}
				}
				return true
			})
		}
		return recs, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return matched, errs, nil
}
