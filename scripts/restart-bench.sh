#!/usr/bin/env bash
# Restart time of a raft cluster (one voter, or three combined nodes
# started together): starts NODES nodes of each samsa binary of BINS in
# turn on the same data, ROUNDS times, interleaved, and reports for each
# start the seconds until every node is ready (/readyz 200: caught up with
# the metadata quorum, broker registered and serving), then stops them
# (STOP=term: SIGTERM, a clean stop; STOP=kill: kill -9, so every start
# after the first recovers after a crash), with the load average.
#
#   git archive 5dcb143 | tar -x -C /tmp/base && (cd /tmp/base && go build -o /tmp/samsa-base ./cmd/samsa)
#   go build -o /tmp/samsa-new ./cmd/samsa
#   NODES=3 ROUNDS=10 BINS="/tmp/samsa-base /tmp/samsa-new" scripts/restart-bench.sh
#
# The data: TOPICS topics of 10 partitions (replication factor NODES),
# created by the first binary before the rounds. Loopback only; free
# ports; everything under a new temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${BINS:?BINS: samsa binaries to compare}"
nodes=${NODES:-1}
stop=${STOP:-term}
work=$(mktemp -d)
free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
now() { date +%s.%N; }
first=${BINS%% *}
cid=$("$first" storage random-uuid)
declare -a bport cport hport pids
voters=
for i in $(seq "$nodes"); do
	bport[i]=$(free) cport[i]=$(free) hport[i]=$(free)
	voters+="${voters:+,}$i@127.0.0.1:${cport[i]}"
done
# start BIN NAME: starts every node, waits until all are ready, prints the time.
start() {
	local bin=$1 name=$2 t0 tr= i ready
	t0=$(now)
	for i in $(seq "$nodes"); do
		"$bin" server --override "node.id=$i" --override "process.roles=broker,controller" \
			--override "cluster.id=$cid" --override "log.dirs=$work/node-$i" \
			--override "listeners=PLAINTEXT://127.0.0.1:${bport[i]},CONTROLLER://127.0.0.1:${cport[i]}" \
			--override "controller.quorum.voters=$voters" --override "http.listener=127.0.0.1:${hport[i]}" \
			>>"$work/$name-$i.log" 2>&1 &
		pids[i]=$!
	done
	while [[ -z "$tr" ]]; do
		ready=0
		for i in $(seq "$nodes"); do
			kill -0 "${pids[i]}" 2>/dev/null || { echo "$name node $i exited: see $work/$name-$i.log" >&2; exit 1; }
			curl -fs "http://127.0.0.1:${hport[i]}/readyz" >/dev/null 2>&1 && ready=$((ready + 1))
		done
		[[ $ready == "$nodes" ]] && tr=$(now)
		sleep 0.02 # polling interval: the figures are to a few hundredths of a second
	done
	printf '%s\tready=%.2fs\tload=%s\n' "$name" "$(echo "$tr - $t0" | bc)" "$(cut -d' ' -f1 /proc/loadavg)"
}
halt() {
	local i sig=TERM
	[[ $stop == kill ]] && sig=KILL
	for i in $(seq "$nodes"); do kill -s "$sig" "${pids[i]}" 2>/dev/null || true; done
	for i in $(seq "$nodes"); do wait "${pids[i]}" 2>/dev/null || true; done
}
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done' EXIT
start "$first" setup >/dev/null
for t in $(seq "${TOPICS:-10}"); do
	"$first" topic create -b "127.0.0.1:${bport[1]}" -p 10 -r "$nodes" "bench-$t" >/dev/null
done
halt
for r in $(seq "${ROUNDS:-1}"); do
	for bin in $BINS; do
		start "$bin" "$(basename "$bin")-$r"
		halt
	done
done
echo "server logs: $work"
