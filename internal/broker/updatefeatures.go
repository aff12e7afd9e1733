package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/controller"
	"github.com/samsahq/samsa/internal/server"
)

// UpdateFeatures: v0-1
//
// Version notes:
//   - v0: the lowest version served
//   - v1: ValidateOnly (request), UpgradeType (request FeatureUpdate)

// UpdateFeatures v0-v1 (KIP-584, KIP-778): finalizes feature levels for
// the cluster on the active controller (forwarded, KIP-590), written to the
// metadata log; needs ALTER on the cluster. The one feature is
// transaction.version (0-2): kafka-features --bootstrap-server ... upgrade
// --feature transaction.version=2 turns transactions v2 (KIP-890 part 2)
// on, downgrade --feature transaction.version=1 off again for clients that
// connect or refresh their ApiVersions afterwards. Per feature:
// INVALID_UPDATE_VERSION for an unknown feature, a level out of [0, 2], or
// a downgrade without allow_downgrade (v0) or a downgrade upgrade_type
// (v1: 2 SAFE_DOWNGRADE or 3 UNSAFE_DOWNGRADE).
func init() { register(kmsg.UpdateFeatures, 0, 1, handleUpdateFeatures) }

func handleUpdateFeatures(ctx context.Context, b *Broker, _ *server.Conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.UpdateFeaturesRequest)
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	ups := make([]controller.FeatureUpdate, len(req.FeatureUpdates))
	for i, u := range req.FeatureUpdates {
		ups[i] = controller.FeatureUpdate{Name: u.Feature, Level: u.MaxVersionLevel, AllowDowngrade: u.AllowDowngrade}
		if req.Version >= 1 {
			ups[i].AllowDowngrade = u.UpgradeType == 2 || u.UpgradeType == 3
			ups[i].UpgradeOnly = u.UpgradeType == 1
		}
	}
	errs, err := b.ctrl.UpdateFeatures(ctx, ups, req.ValidateOnly)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errCode(err), errMessage(err)
	}
	for i, u := range req.FeatureUpdates {
		rr := kmsg.NewUpdateFeaturesResponseResult()
		rr.Feature = u.Feature
		e := err
		if e == nil {
			e = errs[i]
		}
		rr.ErrorCode, rr.ErrorMessage = errCode(e), errMessage(e)
		resp.Results = append(resp.Results, rr)
	}
	return resp, nil
}
