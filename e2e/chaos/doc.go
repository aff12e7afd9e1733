// Package chaos runs the fault harness of issue 18: a Jepsen-style queue
// workload (idempotent acks=all producers, a transactional producer,
// read_committed and read_uncommitted consumers) against a 3-node cluster
// of samsa processes while a seeded nemesis kills (SIGKILL), restarts and
// pauses (SIGSTOP/SIGCONT) nodes and the active controller and cuts a node
// from the others (internal/proctest proxies). Each schedule's
// history and its analysis (internal/chaos/check) go under a results
// directory. `go test ./e2e/chaos` runs one short schedule;
// scripts/chaos.sh runs many.
package chaos
