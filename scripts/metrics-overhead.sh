#!/usr/bin/env bash
# Overhead of metrics: samsa perf produce against a node with its
# http.listener scraped every second, and against a node with no
# http.listener (metrics off), in interleaved runs; prints records/s of
# each run and the ratio of the medians (on / off).
#   scripts/metrics-overhead.sh [runs] [records]
set -euo pipefail
runs=${1:-3}
records=${2:-1000000}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"; true' EXIT
go build -o "$tmp/samsa" ./cmd/samsa
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

run() { # $1: on|off
  local dir="$tmp/data-$RANDOM" kp cp hp=""
  kp=$(free_port); cp=$(free_port)
  local http="http.listener="
  if [ "$1" = on ]; then hp=$(free_port); http="http.listener=127.0.0.1:$hp"; fi
  "$tmp/samsa" server --log-level warn --override "log.dirs=$dir" \
    --override "listeners=PLAINTEXT://127.0.0.1:$kp,CONTROLLER://127.0.0.1:$cp" --override "$http" &
  local srv=$! scraper=""
  for _ in $(seq 100); do (echo > /dev/tcp/127.0.0.1/$kp) 2>/dev/null && break; sleep 0.1; done
  if [ "$1" = on ]; then
    (while :; do curl -s -o /dev/null "http://127.0.0.1:$hp/metrics"; sleep 1; done) &
    scraper=$!
  fi
  "$tmp/samsa" perf produce bench -b "127.0.0.1:$kp" -n "$records" --partitions 6 -q \
    | tail -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["records_per_sec"])'
  [ -n "$scraper" ] && kill "$scraper"
  kill "$srv"; wait "$srv" 2>/dev/null || true
  rm -rf "$dir"
}

on=(); off=()
for i in $(seq "$runs"); do
  off+=("$(run off)"); echo "run $i off: ${off[-1]} records/s"
  on+=("$(run on)");   echo "run $i on:  ${on[-1]} records/s"
done
python3 - "${on[*]}" "${off[*]}" <<'PY'
import statistics, sys
on = [float(x) for x in sys.argv[1].split()]
off = [float(x) for x in sys.argv[2].split()]
print(f"median on {statistics.median(on):.0f}, off {statistics.median(off):.0f} records/s: ratio {statistics.median(on)/statistics.median(off):.3f}x")
PY
exit 0
