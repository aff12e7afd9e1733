// Package cluster holds fault tests of replication and of the metadata
// quorum against real samsa server processes on loopback: SIGKILL and
// restart of partition leaders, SIGSTOP of followers, SIGKILL of the
// active controller, and a leader cut off by TCP proxies. A checker
// verifies that every acknowledged record is read back exactly once, at
// its acknowledged offset and in order.
//
// `go test ./e2e/cluster` runs the short variants; `-long` (or
// SAMSA_LONG_FAULTS=1) runs longer ones, and `-throughput` measures
// acks=all on three nodes beside acks=1 on one. See docs/testing.md.
package cluster
