package pmap

import (
	"math/rand/v2"
	"testing"
)

// TestAgainstMap applies random sets and deletes to a Map and a Go map and
// checks they agree, and that every earlier version is unchanged.
func TestAgainstMap(t *testing.T) {
	for _, keys := range []int{10, 1000, 20000} {
		r := rand.New(rand.NewPCG(1, uint64(keys)))
		var m Map[int, int]
		want := map[int]int{}
		type version struct {
			m    Map[int, int]
			want map[int]int
		}
		var versions []version
		for i := range 5 * keys {
			k := r.IntN(keys)
			if r.IntN(3) == 0 {
				m = m.Delete(k)
				delete(want, k)
			} else {
				m = m.Set(k, i)
				want[k] = i
			}
			if i%(keys/2) == 0 {
				cp := make(map[int]int, len(want))
				for k, v := range want {
					cp[k] = v
				}
				versions = append(versions, version{m, cp})
			}
		}
		versions = append(versions, version{m, want})
		for _, v := range versions {
			if v.m.Len() != len(v.want) {
				t.Fatalf("%d keys: Len %d, want %d", keys, v.m.Len(), len(v.want))
			}
			n := 0
			for k, x := range v.m.All() {
				n++
				if w, ok := v.want[k]; !ok || w != x {
					t.Fatalf("%d keys: All yields %d=%d, want %d (%v)", keys, k, x, w, ok)
				}
			}
			if n != len(v.want) {
				t.Fatalf("%d keys: All yields %d entries, want %d", keys, n, len(v.want))
			}
			for k := range keys {
				x, ok := v.m.Get(k)
				w, wok := v.want[k]
				if ok != wok || x != w {
					t.Fatalf("%d keys: Get(%d) = %d %v, want %d %v", keys, k, x, ok, w, wok)
				}
			}
		}
	}
}

func TestStringKeys(t *testing.T) {
	var m Map[string, int]
	m = m.Set("a", 1).Set("b", 2).Set("a", 3)
	if v, _ := m.Get("a"); v != 3 || m.Len() != 2 {
		t.Fatalf("Get(a) = %d, Len %d", v, m.Len())
	}
	if _, ok := m.Delete("a").Delete("b").Get("b"); ok {
		t.Fatal("deleted key found")
	}
}

func BenchmarkSet(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		var m Map[int, int]
		for i := range n {
			m = m.Set(i, i)
		}
		b.Run(itoa(n), func(b *testing.B) {
			for i := range b.N {
				_ = m.Set(i%n, i)
			}
		})
	}
}

func itoa(n int) string {
	switch n {
	case 1000:
		return "1k"
	default:
		return "100k"
	}
}
