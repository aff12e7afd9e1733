#!/usr/bin/env bash
# Three nodes, many partitions (issue 13): creates TOPICS x PARTITIONS
# (default 300 x 100 = 30,000) with replication factor 3 through the Admin
# API, then kill -9 of the active controller (time to a new active
# controller and to a live leader for every partition), restart of that
# node (time back into every ISR), controlled shutdown of a broker (time
# until every partition it led has moved, and to exit) and its restart
# (time back into every ISR). e2e/cluster TestClusterScale; its CI-sized
# default is 15 x 100. Figures and the load average are appended to REPORT.
#
#   scripts/scale-cluster.sh
#   TOPICS=100 scripts/scale-cluster.sh               # 10,000 partitions
#   SESSION_MS=9000 scripts/scale-cluster.sh          # broker.session.timeout.ms (default 3000)
#   PROFILE=/tmp/prof scripts/scale-cluster.sh         # (absolute path) CPU profiles (10 s) and goroutine dumps (every 250 ms) of the nodes during the
#                                                      # failover and the controlled shutdown, and
#                                                      # the nodes' logs, in that directory
#                                                      # (go tool pprof -top /tmp/prof/shutdown-node-2.pprof)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(mktemp -d)/samsa
go build -o "$bin" ./cmd/samsa
report=${REPORT:-/dev/stdout}
echo "ulimit -n: $(ulimit -n); load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$report"
PROCTEST_BIN=$bin go test -count=1 -timeout "${TIMEOUT:-60m}" -v -run '^TestClusterScale$' ./e2e/cluster \
	-args -cluster.topics "${TOPICS:-300}" -cluster.partitions "${PARTITIONS:-100}" -cluster.report "$report" -cluster.session "${SESSION_MS:-3000}" \
	${PROFILE:+-cluster.profile "$PROFILE"}
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$report"
