#!/usr/bin/env bash
# Overhead of metrics: samsa perf produce against a node with its
# http.listener scraped every second, and against a node with no
# http.listener (metrics off), in interleaved runs; prints records/s of
# each run and the broker's CPU time per record (utime+stime from
# /proc/PID/stat, less sensitive to other load on a shared machine than
# throughput), and the ratios of the medians (on / off).
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
  local rate cpu
  rate=$("$tmp/samsa" perf produce bench -b "127.0.0.1:$kp" -n "$records" --partitions 6 -q \
    | tail -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["records_per_sec"])')
  cpu=$(python3 -c 'import os,sys; f=open(f"/proc/{sys.argv[1]}/stat").read().rsplit(")",1)[1].split(); print((int(f[11])+int(f[12]))/os.sysconf("SC_CLK_TCK")*1e6/int(sys.argv[2]))' "$srv" "$records")
  echo "$rate $cpu"
  [ -n "$scraper" ] && kill "$scraper"
  kill "$srv"; wait "$srv" 2>/dev/null || true
  rm -rf "$dir"
}

on=(); off=()
for i in $(seq "$runs"); do
  r=$(run off); off+=("$r"); echo "run $i off: ${r% *} records/s, ${r#* } broker CPU us/record"
  r=$(run on);  on+=("$r");  echo "run $i on:  ${r% *} records/s, ${r#* } broker CPU us/record"
done
python3 - "${on[*]}" "${off[*]}" <<'PY'
import statistics, sys
def parse(s):
    v = [float(x) for x in s.split()]
    return v[0::2], v[1::2]
on_rate, on_cpu = parse(sys.argv[1])
off_rate, off_cpu = parse(sys.argv[2])
m = statistics.median
print(f"throughput: median on {m(on_rate):.0f}, off {m(off_rate):.0f} records/s: ratio {m(on_rate)/m(off_rate):.3f}x")
print(f"broker CPU per record: median on {m(on_cpu):.3f}, off {m(off_cpu):.3f} us: ratio off/on {m(off_cpu)/m(on_cpu):.3f}x")
PY
exit 0
