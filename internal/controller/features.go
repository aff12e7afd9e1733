package controller

import (
	"context"
	"errors"
	"fmt"

	"github.com/samsahq/samsa/internal/metadata"
)

// ErrInvalidFeatureUpdate is a feature update UpdateFeatures refuses: an
// unknown feature, a level outside the supported range, or a downgrade
// not allowed (INVALID_UPDATE_VERSION).
var ErrInvalidFeatureUpdate = errors.New("invalid feature update")

// FeatureUpdate is one entry of UpdateFeatures (API 57, KIP-584): set
// Name to Level. A level below the finalized one is a downgrade, refused
// unless AllowDowngrade; UpgradeOnly (upgrade_type UPGRADE, v1+) refuses
// a downgrade whatever AllowDowngrade says.
type FeatureUpdate struct {
	Name           string
	Level          int16
	AllowDowngrade bool
	UpgradeOnly    bool
}

// UpdateFeatures finalizes feature levels for the cluster, written to the
// metadata log as FeatureLevelRecord (level 0 removes the feature), as
// Kafka's FeatureControlManager. It returns one error per update (nil
// when accepted, wrapping ErrInvalidFeatureUpdate when refused) and the
// error of the write; with validateOnly nothing is written. Safe for
// concurrent use; call on the active controller.
func (c *Controller) UpdateFeatures(ctx context.Context, updates []FeatureUpdate, validateOnly bool) ([]error, error) {
	errs := make([]error, len(updates))
	check := func(im *metadata.Image) []metadata.Record {
		var recs []metadata.Record
		seen := map[string]bool{}
		for i, u := range updates {
			f, ok := metadata.SupportedFeatureByName(u.Name)
			cur := im.FeatureLevel(u.Name)
			switch {
			case seen[u.Name]:
				errs[i] = fmt.Errorf("%w: feature %s updated more than once", ErrInvalidFeatureUpdate, u.Name)
			case !ok:
				errs[i] = fmt.Errorf("%w: the controller does not support feature %q", ErrInvalidFeatureUpdate, u.Name)
			case u.Level < f.Min || u.Level > f.Max:
				errs[i] = fmt.Errorf("%w: feature %s level %d not in the supported range [%d, %d]", ErrInvalidFeatureUpdate, u.Name, u.Level, f.Min, f.Max)
			case u.Level < cur && (u.UpgradeOnly || !u.AllowDowngrade):
				errs[i] = fmt.Errorf("%w: feature %s at level %d cannot be downgraded to %d without a downgrade type", ErrInvalidFeatureUpdate, u.Name, cur, u.Level)
			default:
				recs = append(recs, metadata.FeatureLevelRecord{Name: u.Name, FeatureLevel: u.Level})
			}
			seen[u.Name] = true
		}
		return recs
	}
	if validateOnly {
		check(c.image.Load())
		return errs, nil
	}
	err := c.write(ctx, func(im *metadata.Image) ([]metadata.Record, error) { return check(im), nil })
	return errs, err
}
