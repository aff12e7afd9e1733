package metadata

import (
	"fmt"
	"strconv"
	"strings"
)

// FeatureTransactionVersion is Kafka's transaction.version feature
// (KIP-890, KIP-1022): level 2 makes clients run transactions under
// KIP-890 part 2 (EndTxn v5 bumps the producer epoch on every commit and
// abort, Produce v12 and TxnOffsetCommit v5 add partitions implicitly);
// levels 0 and 1 keep them on transaction version 1. Level 1 only lets
// Kafka write flexible __transaction_state records, which Samsa reads at
// any level.
const FeatureTransactionVersion = "transaction.version"

// SupportedFeature is a feature this build supports, with its level range
// and the level a new cluster starts with (Kafka's latest production
// level of its 4.x release, as kafka-storage format picks by default).
type SupportedFeature struct {
	Name         string
	Min, Max     int16
	DefaultLevel int16
}

// SupportedFeatures lists the features of ApiVersions v3+
// SupportedFeatures, by name.
var SupportedFeatures = []SupportedFeature{
	{Name: FeatureTransactionVersion, Min: 0, Max: 2, DefaultLevel: 2},
}

// SupportedFeatureByName returns the supported feature name; ok is false
// for a feature this build does not know.
func SupportedFeatureByName(name string) (SupportedFeature, bool) {
	for _, f := range SupportedFeatures {
		if f.Name == name {
			return f, true
		}
	}
	return SupportedFeature{}, false
}

// ParseFeatureLevel parses "name=level" (kafka-storage format --feature)
// into a FeatureLevelRecord, checking the feature is known and the level
// in its range.
func ParseFeatureLevel(spec string) (FeatureLevelRecord, error) {
	name, level, ok := strings.Cut(spec, "=")
	if !ok {
		return FeatureLevelRecord{}, fmt.Errorf("feature %q: want name=level", spec)
	}
	name = strings.TrimSpace(name)
	f, ok := SupportedFeatureByName(name)
	if !ok {
		return FeatureLevelRecord{}, fmt.Errorf("unknown feature %q (supported: %s)", name, FeatureTransactionVersion)
	}
	l, err := strconv.ParseInt(strings.TrimSpace(level), 10, 16)
	if err != nil || int16(l) < f.Min || int16(l) > f.Max {
		return FeatureLevelRecord{}, fmt.Errorf("feature %s: level %q not in [%d, %d]", name, level, f.Min, f.Max)
	}
	return FeatureLevelRecord{Name: name, FeatureLevel: int16(l)}, nil
}

// DefaultFeatureLevels returns the records of the default level of each
// supported feature that recs does not set, for a new cluster.
func DefaultFeatureLevels(recs []Record) []Record {
	set := map[string]bool{}
	for _, r := range recs {
		if f, ok := r.(FeatureLevelRecord); ok {
			set[f.Name] = true
		}
	}
	var out []Record
	for _, f := range SupportedFeatures {
		if !set[f.Name] && f.DefaultLevel > 0 {
			out = append(out, FeatureLevelRecord{Name: f.Name, FeatureLevel: f.DefaultLevel})
		}
	}
	return out
}
