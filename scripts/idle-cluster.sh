#!/usr/bin/env bash
# What an idle cluster costs (issue 13): three nodes with TOPICS x
# PARTITIONS (default 100 x 100 = 10,000) partitions of replication factor
# 3 and no client; each node's CPU time per minute over IDLE (default 60s)
# once every replica's log exists. e2e/cluster TestClusterIdle. Figures
# and the load average are appended to REPORT. BIN runs another build
# (e.g. main's) against the same test, to compare.
#
#   scripts/idle-cluster.sh
#   TOPICS=300 scripts/idle-cluster.sh                 # 30,000 partitions
#   BIN=/tmp/samsa-main scripts/idle-cluster.sh        # another binary
#   PROFILE=/tmp/prof scripts/idle-cluster.sh          # (absolute path) a CPU profile of each node over the first 30 s
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BIN:-}
if [ -z "$bin" ]; then
	bin=$(mktemp -d)/samsa
	go build -o "$bin" ./cmd/samsa
fi
report=${REPORT:-/dev/stdout}
echo "binary $bin; load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$report"
PROCTEST_BIN=$bin go test -count=1 -timeout "${TIMEOUT:-60m}" -v -run '^TestClusterIdle$' ./e2e/cluster \
	-args -cluster.topics "${TOPICS:-100}" -cluster.partitions "${PARTITIONS:-100}" -cluster.report "$report" -cluster.idle "${IDLE:-60s}" \
	${PROFILE:+-cluster.profile "$PROFILE"}
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$report"
