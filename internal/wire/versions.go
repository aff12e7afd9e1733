package wire

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// VersionRange is the supported [Min, Max] versions of one API.
type VersionRange struct{ Min, Max int16 }

// Versions is the table of supported API keys and versions, advertised by
// ApiVersions. Build it once at startup; it is read-only afterwards and safe
// for concurrent use.
type Versions struct {
	m map[int16]VersionRange
}

// NewVersions returns an empty table.
func NewVersions() *Versions { return &Versions{m: map[int16]VersionRange{}} }

// Add supports key in [min, max], capped at what kmsg can encode.
func (v *Versions) Add(key kmsg.Key, min, max int16) {
	if req := kmsg.RequestForKey(int16(key)); req != nil && req.MaxVersion() < max {
		max = req.MaxVersion()
	}
	v.m[int16(key)] = VersionRange{min, max}
}

// Supports reports whether version of key is in the table.
func (v *Versions) Supports(key, version int16) bool {
	r, ok := v.m[key]
	return ok && version >= r.Min && version <= r.Max
}

// Range returns the supported range of key.
func (v *Versions) Range(key int16) (VersionRange, bool) {
	r, ok := v.m[key]
	return r, ok
}

// Keys returns the supported API keys and their ranges in key order, as
// ApiVersions lists them.
func (v *Versions) Keys() []kmsg.ApiVersionsResponseApiKey {
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(v.m))
	for k, r := range v.m {
		ak := kmsg.NewApiVersionsResponseApiKey()
		ak.ApiKey, ak.MinVersion, ak.MaxVersion = k, r.Min, r.Max
		out = append(out, ak)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ApiKey < out[j].ApiKey })
	return out
}
