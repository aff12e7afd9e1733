#!/usr/bin/env bash
# tls-bench.sh: produce and consume throughput over PLAINTEXT, SSL and
# SASL_SSL (SCRAM-SHA-512) listeners of one node, in the same run,
# interleaved ROUNDS times, with `samsa perf`; prints each run's JSON line's
# records/s and the ratios to PLAINTEXT (docs/BENCHMARKS.md, "TLS").
#
#   scripts/tls-bench.sh [RECORDS] [ROUNDS]     (defaults 300000, 2)
set -euo pipefail
records=${1:-300000}
rounds=${2:-2}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
go build -o "$work/samsa" "$root/cmd/samsa"
s="$work/samsa"
"$s" certs --dir "$work/certs" >/dev/null
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pp=$(free_port); ps=$(free_port); pa=$(free_port); pc=$(free_port)
cat >"$work/server.properties" <<P
log.dirs=$work/data
listeners=PLAINTEXT://127.0.0.1:$pp,SSL://127.0.0.1:$ps,SASL_SSL://127.0.0.1:$pa,CONTROLLER://127.0.0.1:$pc
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT
ssl.keystore.location=$work/certs/server.pem
ssl.truststore.location=$work/certs/ca.pem
sasl.enabled.mechanisms=SCRAM-SHA-512
P
"$s" storage format -t "$("$s" storage random-uuid)" -c "$work/server.properties" \
  --add-scram 'SCRAM-SHA-512=[name=bench,password=bench-secret]' >/dev/null
"$s" server --config "$work/server.properties" >"$work/server.log" 2>&1 &
pid=$!
for _ in $(seq 100); do "$s" topic list -b 127.0.0.1:$pp --timeout 1s >/dev/null 2>&1 && break; sleep 0.1; done
printf 'security.protocol=SSL\nssl.truststore.location=%s\n' "$work/certs/ca.pem" >"$work/ssl.properties"
printf 'security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=bench\nsasl.password=bench-secret\nssl.truststore.location=%s\n' "$work/certs/ca.pem" >"$work/sasl.properties"
printf '' >"$work/plain.properties"
declare -A addr=([PLAINTEXT]=127.0.0.1:$pp [SSL]=127.0.0.1:$ps [SASL_SSL]=127.0.0.1:$pa)
declare -A conf=([PLAINTEXT]=$work/plain.properties [SSL]=$work/ssl.properties [SASL_SSL]=$work/sasl.properties)
rate() { python3 -c 'import json,sys; print(round(json.loads(sys.stdin.read().strip().splitlines()[-1])["records_per_sec"]))'; }
declare -A prod cons
for r in $(seq "$rounds"); do
  for l in PLAINTEXT SSL SASL_SSL; do
    t="bench-$l-$r"
    p=$("$s" perf produce "$t" -q --partitions 8 --acks 1 -n "$records" -b "${addr[$l]}" --command-config "${conf[$l]}" | rate)
    c=$("$s" perf consume "$t" -q -n "$records" -b "${addr[$l]}" --command-config "${conf[$l]}" | rate)
    echo "round $r $l produce $p records/s, consume $c records/s"
    prod[$l]="${prod[$l]:-} $p"; cons[$l]="${cons[$l]:-} $c"
  done
done
med() { python3 -c 'import statistics,sys; print(statistics.median(map(float,sys.argv[1:])))' $1; }
pp0=$(med "${prod[PLAINTEXT]}"); cp0=$(med "${cons[PLAINTEXT]}")
for l in PLAINTEXT SSL SASL_SSL; do
  python3 -c "import sys; print('%-9s produce %8.0f records/s (%.2fx)  consume %8.0f records/s (%.2fx)' % ('$l', $(med "${prod[$l]}"), $(med "${prod[$l]}")/$pp0, $(med "${cons[$l]}"), $(med "${cons[$l]}")/$cp0))"
done
