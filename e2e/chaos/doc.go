// Package chaos runs the fault harness of issue 18: a Jepsen-style queue
// workload (idempotent acks=all producers, transactional producers on
// transactions v2 and v1 whose EndTxn responses are lost or delayed by
// proxies of their own, read_committed and read_uncommitted consumers)
// against a 3-node cluster of samsa processes while a seeded nemesis
// kills (SIGKILL), restarts and pauses (SIGSTOP/SIGCONT) nodes and the
// active controller, partitions the network (a node cut from the others,
// bridges, a minority holding a partition leader or the active
// controller), slows links down or makes them drop connections
// (internal/proctest proxies), moves leaderships and replicas, and fills a node's disk, fails its fsyncs or cuts its power
// (the nodes run faultfs, the samsa command on vfs/errorfs, with a control
// socket each; see faultfs's doc). Each schedule's
// history and its analysis (internal/chaos/check) go under a results
// directory. `go test ./e2e/chaos` runs one short schedule;
// scripts/chaos.sh runs many.
package chaos
