#!/usr/bin/env bash
# Unclean restarts of one node (issue 13): starts each samsa binary of BINS
# in turn on the node data in DIR (kill -9 of the previous one: every start
# recovers after a crash), ROUNDS times, interleaved, and reports for each
# start the seconds until its controller is active ("became the active
# controller" in its log) and until it is ready (/readyz 200: every log
# loaded, the broker registered and serving), and the load average.
# Make DIR with a kept scale run, e.g.
#
#   TOPICS=300 DIR=/tmp/scale-data scripts/scale.sh       # 30,000 partitions
#   DIR=/tmp/scale-data BINS="/tmp/samsa-main /tmp/samsa-branch" ROUNDS=3 scripts/unclean-restart.sh
#
# BINS defaults to a build of this checkout. Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${DIR:?DIR: the data directory of a node (see above)}"
if [[ -z "${BINS:-}" ]]; then
	BINS=$(mktemp -d)/samsa
	go build -o "$BINS" ./cmd/samsa
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
logs=$(mktemp -d)
now() { date +%s.%N; }
pid=
# start BIN NAME: starts BIN on DIR, waits until it is ready, prints the figures.
start() {
	local bin=$1 name=$2 log="$logs/$2.log" t0 tc= tr=
	t0=$(now)
	"$bin" server --override "log.dirs=$DIR" --override "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0" \
		--override "http.listener=127.0.0.1:$port" >"$log" 2>&1 &
	pid=$!
	while [[ -z "$tr" ]]; do
		kill -0 "$pid" 2>/dev/null || { echo "$name exited: see $log" >&2; exit 1; }
		[[ -z "$tc" ]] && grep -q "became the active controller" "$log" && tc=$(now)
		curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && tr=$(now)
		sleep 0.1 # polling interval: the figures are to a tenth of a second
	done
	[[ -z "$tc" ]] && tc=$tr
	printf '%s\tcontroller_active=%.1fs\tready=%.1fs\tload=%s\n' "$name" "$(echo "$tc - $t0" | bc)" "$(echo "$tr - $t0" | bc)" "$(cut -d' ' -f1 /proc/loadavg)"
}
crash() { kill -9 "$pid"; wait "$pid" 2>/dev/null || true; }
trap 'kill -9 $pid 2>/dev/null || true' EXIT
# A first start and crash: from then on every start is unclean.
first=${BINS%% *}
start "$first" warmup >/dev/null
crash
for r in $(seq "${ROUNDS:-1}"); do
	for bin in $BINS; do
		start "$bin" "$(basename "$bin")-$r"
		crash
	done
done
echo "server logs: $logs"
