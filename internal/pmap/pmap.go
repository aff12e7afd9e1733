// Package pmap is a persistent (immutable) hash map: a hash array mapped
// trie (Bagwell's HAMT, as Clojure's PersistentHashMap) whose Set and
// Delete return a new map sharing every node they do not change. Both cost
// O(log32 n) time and allocation, so a metadata image of 100,000
// partitions changes one topic without copying the others.
//
// The zero Map is empty and ready to use. A Map is a value safe for
// concurrent readers; it never changes once built.
package pmap

import (
	"hash/maphash"
	"iter"
	"math/bits"
)

// seed is shared by every map of the process: the layout of a trie only
// has to be stable within it.
var seed = maphash.MakeSeed()

const (
	bitsPerLevel = 5
	fanout       = 1 << bitsPerLevel
	maxDepth     = 64 / bitsPerLevel // past it, keys of one hash share a collision node
)

// Map is a persistent map from K to V.
type Map[K comparable, V any] struct {
	root *node[K, V]
	n    int
}

// node is an inner node (bitmap, children) or, at maxDepth, a collision
// bucket (entries only). An inner node holds entries and children in one
// slice: a bit of bitmap set means slot popcount(bitmap below it) is used.
type node[K comparable, V any] struct {
	bitmap uint32
	slots  []slot[K, V]
}

// slot is an entry (child nil) or a child node.
type slot[K comparable, V any] struct {
	child *node[K, V]
	hash  uint64
	key   K
	val   V
}

// Len is the number of entries.
func (m Map[K, V]) Len() int { return m.n }

func hashOf[K comparable](k K) uint64 { return maphash.Comparable(seed, k) }

// Get returns the value of k and whether it is present.
func (m Map[K, V]) Get(k K) (V, bool) {
	h := hashOf(k)
	n := m.root
	for depth := 0; n != nil; depth++ {
		if depth >= maxDepth {
			for _, s := range n.slots {
				if s.key == k {
					return s.val, true
				}
			}
			break
		}
		bit := uint32(1) << ((h >> (depth * bitsPerLevel)) & (fanout - 1))
		if n.bitmap&bit == 0 {
			break
		}
		s := &n.slots[bits.OnesCount32(n.bitmap&(bit-1))]
		if s.child == nil {
			if s.hash == h && s.key == k {
				return s.val, true
			}
			break
		}
		n = s.child
	}
	var zero V
	return zero, false
}

// Set returns a map with k mapped to v.
func (m Map[K, V]) Set(k K, v V) Map[K, V] {
	root, added := set(m.root, 0, hashOf(k), k, v)
	if added {
		m.n++
	}
	m.root = root
	return m
}

func set[K comparable, V any](n *node[K, V], depth int, h uint64, k K, v V) (*node[K, V], bool) {
	if depth >= maxDepth {
		c := &node[K, V]{}
		if n != nil {
			c.slots = make([]slot[K, V], len(n.slots), len(n.slots)+1)
			copy(c.slots, n.slots)
		}
		for i := range c.slots {
			if c.slots[i].key == k {
				c.slots[i].val = v
				return c, false
			}
		}
		c.slots = append(c.slots, slot[K, V]{hash: h, key: k, val: v})
		return c, true
	}
	if n == nil {
		n = &node[K, V]{}
	}
	bit := uint32(1) << ((h >> (depth * bitsPerLevel)) & (fanout - 1))
	i := bits.OnesCount32(n.bitmap & (bit - 1))
	if n.bitmap&bit == 0 {
		c := &node[K, V]{bitmap: n.bitmap | bit, slots: make([]slot[K, V], len(n.slots)+1)}
		copy(c.slots, n.slots[:i])
		c.slots[i] = slot[K, V]{hash: h, key: k, val: v}
		copy(c.slots[i+1:], n.slots[i:])
		return c, true
	}
	c := &node[K, V]{bitmap: n.bitmap, slots: make([]slot[K, V], len(n.slots))}
	copy(c.slots, n.slots)
	s := &c.slots[i]
	var added bool
	switch {
	case s.child != nil:
		s.child, added = set(s.child, depth+1, h, k, v)
	case s.hash == h && s.key == k:
		s.val = v
	default:
		// Two entries share this slot: push both one level down.
		old := *s
		child, _ := set(nil, depth+1, old.hash, old.key, old.val)
		child, added = set(child, depth+1, h, k, v)
		*s = slot[K, V]{child: child}
	}
	return c, added
}

// Delete returns a map without k.
func (m Map[K, V]) Delete(k K) Map[K, V] {
	root, removed := del(m.root, 0, hashOf(k), k)
	if !removed {
		return m
	}
	m.root = root
	m.n--
	return m
}

// del returns the node without k (nil when it becomes empty) and whether
// k was there.
func del[K comparable, V any](n *node[K, V], depth int, h uint64, k K) (*node[K, V], bool) {
	if n == nil {
		return nil, false
	}
	if depth >= maxDepth {
		for i, s := range n.slots {
			if s.key == k {
				if len(n.slots) == 1 {
					return nil, true
				}
				c := &node[K, V]{slots: make([]slot[K, V], 0, len(n.slots)-1)}
				c.slots = append(append(c.slots, n.slots[:i]...), n.slots[i+1:]...)
				return c, true
			}
		}
		return n, false
	}
	bit := uint32(1) << ((h >> (depth * bitsPerLevel)) & (fanout - 1))
	if n.bitmap&bit == 0 {
		return n, false
	}
	i := bits.OnesCount32(n.bitmap & (bit - 1))
	s := n.slots[i]
	if s.child == nil {
		if s.hash != h || s.key != k {
			return n, false
		}
		if len(n.slots) == 1 {
			return nil, true
		}
		c := &node[K, V]{bitmap: n.bitmap &^ bit, slots: make([]slot[K, V], 0, len(n.slots)-1)}
		c.slots = append(append(c.slots, n.slots[:i]...), n.slots[i+1:]...)
		return c, true
	}
	child, removed := del(s.child, depth+1, h, k)
	if !removed {
		return n, false
	}
	c := &node[K, V]{bitmap: n.bitmap, slots: make([]slot[K, V], len(n.slots))}
	copy(c.slots, n.slots)
	switch {
	case child == nil:
		c.bitmap &^= bit
		c.slots = append(c.slots[:i], c.slots[i+1:]...)
		if len(c.slots) == 0 {
			return nil, true
		}
	case depth+1 < maxDepth && len(child.slots) == 1 && child.slots[0].child == nil:
		// A lone entry moves back up.
		c.slots[i] = child.slots[0]
	default:
		c.slots[i].child = child
	}
	return c, true
}

// All yields every entry, in no particular order.
func (m Map[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		walk(m.root, yield)
	}
}

func walk[K comparable, V any](n *node[K, V], yield func(K, V) bool) bool {
	if n == nil {
		return true
	}
	for i := range n.slots {
		s := &n.slots[i]
		if s.child != nil {
			if !walk(s.child, yield) {
				return false
			}
		} else if !yield(s.key, s.val) {
			return false
		}
	}
	return true
}
