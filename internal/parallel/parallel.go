// Package parallel runs the iterations of a loop on a bounded number of
// goroutines.
package parallel

import (
	"sync"
	"sync/atomic"
)

// For runs fn(0), …, fn(n-1) on up to workers goroutines (at least one,
// never more than n), each taking the next index until none is left, and
// returns once every call has returned. With n of 1 or less, or one
// worker, the calls run on the caller's goroutine.
func For(workers, n int, fn func(i int)) {
	workers = max(1, min(workers, n))
	if workers == 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}
