#!/usr/bin/env bash
# Builds lb and runs it with conf/lb.ini in front of three local demo
# backends (127.0.0.1:9001-9003). Try: curl http://127.0.0.1:8080/
# Ctrl-C stops lb and the backends.
set -euo pipefail
cd "$(dirname "$0")/.."

deploy/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j2 --target lb

pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; }
trap cleanup EXIT
for i in 1 2 3; do
    python3 deploy/demo_backend.py "web$i" "900$i" &
    pids+=($!)
done
# Start lb once the backends answer, so that its first checks pass.
for i in 1 2 3; do
    for _ in $(seq 1 100); do
        curl -fs "http://127.0.0.1:900$i/" >/dev/null && break
        sleep 0.1
    done
done
# The demo's config is conf/lb.ini with two changes: the backends speak
# HTTP, so they are checked over HTTP (as the README advises wherever the
# service does), and max_connections fits this machine's descriptor limit
# (each connection takes two, and lb warns with fd_limit_low when the cap
# cannot be met; 10000 needs a hard limit above 20,000).
limit=$(ulimit -Hn)
[ "$limit" = unlimited ] && limit=1048576
max=$(( (limit - 200) / 2 ))
[ "$max" -gt 10000 ] && max=10000
sed -e "s/^max_connections = 10000$/max_connections = $max/" \
    -e "s/^check = tcp$/check = http/" conf/lb.ini > build/demo.ini
echo "demo: backends web1..web3 on 127.0.0.1:9001-9003; lb on http://127.0.0.1:8080/," \
     "dashboard on http://127.0.0.1:9900/ (config: build/demo.ini, max_connections $max)" >&2
build/lb -c build/demo.ini
