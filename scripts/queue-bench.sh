#!/usr/bin/env bash
# queue-bench.sh: the records/s a group acknowledges on one node, with
# `samsa perf queue`: a consumer group (the baseline, autocommit) against
# share consumers (KIP-932) accepting in batches and one by one, with 1
# and 4 consumers, interleaved ROUNDS times; prints each run's records/s,
# the medians and their ratios to the consumer group with as many
# consumers (docs/BENCHMARKS.md, "Queues").
#
#   scripts/queue-bench.sh [RECORDS] [ROUNDS] [ONE_BY_ONE]   (defaults 100000, 2, 3000)
#
# QUEUE_BENCH_BIN=path runs that samsa binary instead of building this tree's
# (to compare two builds, run the script once for each, alternating; not
# SAMSA_BIN: samsa reads SAMSA_* variables as properties).
#
# RECORDS records of 100 bytes in 8 partitions are read by every batch and
# consumer-group run; the one-by-one runs stop after ONE_BY_ONE records (a
# round trip and a durable state write per record).
set -euo pipefail
records=${1:-100000}
rounds=${2:-2}
one=${3:-3000}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
if [ -n "${QUEUE_BENCH_BIN:-}" ]; then
  s=$QUEUE_BENCH_BIN
else
  go build -o "$work/samsa" "$root/cmd/samsa"
  s="$work/samsa"
fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pp=$(free_port); pc=$(free_port); ph=$(free_port)
cat >"$work/server.properties" <<P
log.dirs=$work/data
listeners=PLAINTEXT://127.0.0.1:$pp,CONTROLLER://127.0.0.1:$pc
http.listener=127.0.0.1:$ph
group.initial.rebalance.delay.ms=0
P
"$s" storage format -t "$("$s" storage random-uuid)" -c "$work/server.properties" >/dev/null
"$s" server --config "$work/server.properties" >"$work/server.log" 2>&1 &
pid=$!
b=127.0.0.1:$pp
for _ in $(seq 100); do "$s" topic list -b "$b" --timeout 1s >/dev/null 2>&1 && break; sleep 0.1; done
"$s" perf produce queue -q -b "$b" --partitions 8 --acks 1 -n "$records" --record-size 100 >/dev/null
rate() { python3 -c 'import json,sys; print(round(json.loads(sys.stdin.read().strip().splitlines()[-1])["records_per_sec"]))'; }
declare -A got
for r in $(seq "$rounds"); do
  for c in 1 4; do
    for mode in consumer batch one; do
      args=(--consumers "$c")
      case $mode in
        consumer) args+=(--group-type consumer) ;;
        batch) args+=(--ack batch) ;;
        one) args+=(--ack one --records "$one") ;;
      esac
      v=$("$s" perf queue queue -q -b "$b" "${args[@]}" | rate)
      echo "round $r consumers=$c $mode: $v records/s"
      got[$mode-$c]="${got[$mode-$c]:-} $v"
    done
  done
done
med() { python3 -c 'import statistics,sys; print(statistics.median(map(float,sys.argv[1:])))' $1; }
for c in 1 4; do
  base=$(med "${got[consumer-$c]}")
  for mode in consumer batch one; do
    m=$(med "${got[$mode-$c]}")
    python3 -c "print('consumers=%d %-8s %9.0f records/s (%.4fx the consumer group)' % ($c, '$mode', $m, $m/$base))"
  done
done
