package storage

import "hash/maphash"

// offsetMapEntryBytes is what Kafka's SkimpyOffsetMap spends on one key (a
// 16-byte MD5 digest and an 8-byte offset); log.cleaner.dedupe.buffer.size
// is divided by it to bound the keys of one cleaning, as Kafka does.
const offsetMapEntryBytes = 24

// dedupeLoadFactor is log.cleaner.io.buffer.load.factor's default (0.9):
// the share of the buffer's slots a cleaning fills.
const dedupeLoadFactor = 0.9

// offsetMap maps a key to the last offset it has in the dirty part of a log
// (Kafka's OffsetMap). Keys are stored as 128-bit hashes (two 64-bit
// maphash values with independent seeds), as Kafka stores MD5 digests: a
// collision, with probability about n²/2¹²⁹ for n keys, would drop a
// record. Not safe for concurrent use.
type offsetMap struct {
	seeds      [2]maphash.Seed
	m          map[[2]uint64]int64
	maxEntries int
	// latest is the last offset the map covers: records above it were not
	// mapped and are kept. -1 when empty.
	latest int64
}

func newOffsetMap(maxEntries int) *offsetMap {
	return &offsetMap{
		seeds:      [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		m:          map[[2]uint64]int64{},
		maxEntries: max(maxEntries, 1),
		latest:     -1,
	}
}

func (om *offsetMap) hash(key []byte) [2]uint64 {
	return [2]uint64{maphash.Bytes(om.seeds[0], key), maphash.Bytes(om.seeds[1], key)}
}

// put records offset as key's latest; it returns false, changing nothing,
// when the key is new and the map is full.
func (om *offsetMap) put(key []byte, offset int64) bool {
	h := om.hash(key)
	if _, ok := om.m[h]; !ok && len(om.m) >= om.maxEntries {
		return false
	}
	om.m[h] = offset
	return true
}

// get returns key's latest offset, or -1 when the key is not mapped.
func (om *offsetMap) get(key []byte) int64 {
	if off, ok := om.m[om.hash(key)]; ok {
		return off
	}
	return -1
}

func (om *offsetMap) len() int { return len(om.m) }
