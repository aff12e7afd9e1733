// Package conformance runs Kafka clients from other languages and Go
// libraries against a built samsa binary and writes the compatibility
// table docs/COMPATIBILITY.md.
//
// It is a separate module so that the main module does not depend on cgo,
// sarama or kafka-go. TestConformance builds ../cmd/samsa, starts one
// server per client on free loopback ports, and runs every scenario of
// Scenarios through each client's runner:
//
//   - cmd/goclients: franz-go, IBM/sarama, segmentio/kafka-go,
//     confluent-kafka-go (cgo) and kcat (driven as a process);
//   - python/runner.py: confluent-kafka and kafka-python, with Debian's
//     /usr/bin/python3;
//   - js/runner.js: kafkajs.
//
// The group scenarios (group, group-kip848, group-migration, share-group)
// run a second time, as the columns ending in -3n, on a 3-node cluster
// (internal/proctest's StartCluster, samsa processes on loopback) that
// every client shares: their topics and __consumer_offsets and
// __share_group_state have 3 replicas, the runner gets one node as
// bootstrap and must find the group's coordinator on any of the three
// (FindCoordinator, NOT_COORDINATOR). group-crash-3n and
// group-crash-kip848-3n run there only: the runner starts a second member
// as a child runner (--scenario group-crash-member), which prints each
// record before committing it, and kills it with SIGKILL mid-consumption;
// the first member must take its partitions from its commits, and every
// record must reach one of the two.
//
// A runner is called as
//
//	RUNNER --client NAME --scenario ID --bootstrap HOST:PORT --topic T
//	       [--group G] [--codec C] [--groups 0|1]
//	       [--security-protocol SSL|SASL_SSL --ssl-ca CA.pem
//	        [--ssl-cert CERT.pem --ssl-key KEY.pem]
//	        [--sasl-mechanism SCRAM-SHA-512 --sasl-username U --sasl-password P]]
//
// The security scenarios (sasl-scram-512, mtls, acl-denied) connect to the
// server's SASL_SSL or SSL listener with those flags; the server runs
// Kafka's StandardAuthorizer with the driver's PLAINTEXT principal
// (ANONYMOUS) as a super user, and each scenario's setup creates the SCRAM
// user and the ACLs it needs (see Security).
//
// and prints on its last stdout line `RESULT {"status": S, "detail": D}`
// where S is "pass", "fail" or "na" (the client has no such feature); a
// scenario whose result the driver checks (compacted-read: the key→value
// map the client saw) has the runner print it before, on a line
// `DATA JSON`. The
// driver itself decides "not yet": a scenario whose APIs the broker does
// not advertise in ApiVersions is not run, and flips to run as soon as the
// broker advertises them.
//
// cmd/kfakeserver wraps franz-go's in-memory kfake broker in the command
// line of `samsa server`; `go test -samsa PATH-TO-kfakeserver -doc ""`
// checks the runners on scenarios samsa does not support yet. (kfake, like
// Kafka before 4.0's fix, advertises Produce from v3 only, so librdkafka
// 2.0 sends gzip and snappy batches uncompressed there.)
//
// run-client-suites.sh runs the clients' own suites (kafka-go's, and
// kafkajs's specs from a checkout) against samsa on localhost:9092 and fills
// the client-suites section of the doc, with suite-triage.txt saying who is
// at fault for each failure. It is not part of CI.
//
// A failure of a scenario whose APIs the broker advertises fails the test,
// unless known-failures.txt lists it with a reason (and then the test fails
// when it passes, so the list stays current).
package conformance
