#!/usr/bin/env bash
# One node, many partitions (issue 13): creates TOPICS x PARTITIONS
# (default 1,000 x 100 = 100,000) through the Admin API in CreateTopics
# requests of BATCH topics, produces one record to each partition and reads
# every one back, stops the node cleanly and restarts it, and reports the
# times, the open file descriptors and the RSS at rest (e2e TestScale; its
# CI-sized default is 100 x 100). Figures are appended to REPORT.
#
# The node writes a metadata snapshot every SNAPSHOT_BYTES of metadata log
# (metadata.log.max.record.bytes.between.snapshots, default here 1 MiB:
# Kafka's 20 MiB is more than the log of 100,000 new partitions), so the
# restart loads one; then, unless COMPARE_SNAPSHOTS=false, it restarts
# once without snapshots (moved aside, writing them off by config) and
# once with them again, and reports both and their ratio.
#
#   scripts/scale.sh
#   TOPICS=200 scripts/scale.sh                       # 20,000 partitions
#   LOGS=/tmp/scale-logs scripts/scale.sh             # keep the server's logs
#   DIR=/tmp/scale-data scripts/scale.sh              # keep the node's data; run again to measure restarts only
#   PROFILE=/tmp/scale-prof scripts/scale.sh          # --profile-phases of each process
#   RESTARTS=3 scripts/scale.sh                       # three stops and restarts
#
# Each phase reports its wall time, the server's CPU time (user+system) and
# the one-minute load average at its end (NAME, NAME_cpu, NAME_load).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(mktemp -d)/samsa
go build -o "$bin" ./cmd/samsa
args=(-scale.topics "${TOPICS:-1000}" -scale.partitions "${PARTITIONS:-100}" -scale.batch "${BATCH:-20}"
	-scale.report "${REPORT:-/dev/stdout}" -scale.snapshot-bytes "${SNAPSHOT_BYTES:-1048576}"
	-scale.compare-snapshots="${COMPARE_SNAPSHOTS:-true}")
[[ -n "${DIR:-}" ]] && args+=(-scale.dir "$DIR")
[[ -n "${PROFILE:-}" ]] && args+=(-scale.profile "$PROFILE")
[[ -n "${RESTARTS:-}" ]] && args+=(-scale.restarts "$RESTARTS")
if [[ -n "${LOGS:-}" ]]; then
	mkdir -p "$LOGS"
	args+=(-scale.logs "$LOGS")
fi
echo "ulimit -n: $(ulimit -n)"
PROCTEST_BIN=$bin go test -count=1 -timeout "${TIMEOUT:-30m}" -v -run '^TestScale$' ./e2e -args "${args[@]}"
