package controller

import (
	"context"

	"github.com/samsahq/samsa/internal/metadata"
	"github.com/samsahq/samsa/internal/quota"
)

// QuotaOp sets (Remove false) or removes one quota of an entity.
type QuotaOp struct {
	Key    string
	Value  float64
	Remove bool
}

// QuotaAlteration is the ops of one entity (AlterClientQuotas, KIP-546).
type QuotaAlteration struct {
	Entity quota.Entity
	Ops    []QuotaOp
}

// AlterClientQuotas applies alterations as ClientQuotaRecords, one error
// per alteration: quota.ErrInvalid for an entity or op Kafka refuses (the
// alteration then changes nothing). The valid alterations are committed
// in one batch unless validateOnly.
func (c *Controller) AlterClientQuotas(ctx context.Context, alts []QuotaAlteration, validateOnly bool) ([]error, error) {
	errs := make([]error, len(alts))
	var recs []metadata.Record
	for i, a := range alts {
		e := a.Entity.Normalize()
		var rs []metadata.Record
		for _, op := range a.Ops {
			var v *float64
			if !op.Remove {
				v = &op.Value
			}
			if errs[i] = quota.Validate(e, op.Key, v); errs[i] != nil {
				break
			}
			rs = append(rs, metadata.ClientQuotaRecord{Entity: e, Key: op.Key, Value: op.Value, Remove: op.Remove})
		}
		if errs[i] == nil {
			recs = append(recs, rs...)
		}
	}
	if validateOnly || len(recs) == 0 {
		return errs, nil
	}
	return errs, c.write(ctx, func(*metadata.Image) ([]metadata.Record, error) { return recs, nil })
}
