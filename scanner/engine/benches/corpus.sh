#!/usr/bin/env bash
# The engine over the whole template corpus against one private nginx on
# loopback, side by side with wrk against the same nginx: requests sent,
# wall time, request rate, the ratio to wrk's rate, load and compile time,
# peak RSS.
#
#   scanner/engine/benches/corpus.sh            # release build, default settings
#   BENCH_ARGS="--rate-limit 150" scanner/engine/benches/corpus.sh
#
# Needs nginx and wrk (`apt-get install -y nginx wrk`) and GNU time
# (/usr/bin/time). Every request goes to 127.0.0.1 only. Environment:
# SCANFLEET_CORPUS (template directory), BENCH_PORT (nginx port, a free
# one by default), BENCH_ARGS (extra `run` arguments), WRK_SECONDS (5),
# BENCH_KEEP (a path prefix: keep nginx's access log, the engine's stderr
# and its findings),
# BENCH_PROFILE (a file: record the engine with `perf record -g` into it,
# at BENCH_PROFILE_HZ samples a second, 499 by default; summarise with
# `perf report -i FILE --no-children --sort symbol`),
# BENCH_CALLGRIND (a file: run the engine under `valgrind --tool=callgrind`
# into it, which counts instructions, nearly the same from run to run (within
# 0.1%) whatever else the machine is doing; then `callgrind_annotate --inclusive=yes FILE` and
# read the line of `Engine::start::{{closure}}::{{closure}}::{{closure}}`
# for the scan's template jobs; the rates printed are then meaningless),
# BENCH_SPLIT (1: record both cores with `perf record -a` (Debian: linux-perf) during wrk's run
# and the engine's, and print where a request's CPU time went: the
# engine's own code and the kernel on its behalf, nginx, and wrk, in
# microseconds per request; BENCH_SPLIT_HZ samples a second, 1999 by
# default),
# BENCH_BIN (a scanner binary to measure instead of building this checkout,
# e.g. an earlier build for a before/after comparison), BENCH_TARGETS (1:
# scan the same nginx as this many targets, one port each, for a longer and
# steadier scan phase; the counts are then for all targets together).
set -euo pipefail

root=$(cd "$(dirname "$0")/../../.." && pwd)
corpus=${SCANFLEET_CORPUS:-$root/../shared/corpus/nuclei-templates/http}
target_dir=${CARGO_TARGET_DIR:-$root/target}
wrk_seconds=${WRK_SECONDS:-5}
for tool in nginx wrk /usr/bin/time; do
    command -v "$tool" >/dev/null || {
        echo "missing $tool (apt-get install -y nginx wrk time)" >&2
        exit 1
    }
done
[ -d "$corpus" ] || { echo "corpus $corpus not found" >&2; exit 1; }

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
port=${BENCH_PORT:-$(free_port)}
ports=("$port")
for _ in $(seq 2 "${BENCH_TARGETS:-1}"); do
    ports+=("$(free_port)")
done
listen=""
targets=()
for p in "${ports[@]}"; do
    listen="$listen listen 127.0.0.1:$p;"
    targets+=(-u "http://127.0.0.1:$p")
done
work=$(mktemp -d /tmp/scanfleet-bench.XXXXXX)
# nginx workers run as an unprivileged user: without this they cannot read
# the site and answer every request with 403.
chmod 755 "$work"
nginx_pid=
cleanup() {
    [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# A small static site: a home page, robots.txt, a stylesheet, a favicon;
# every other path is nginx's 404.
mkdir -p "$work/site/css" "$work/logs"
cat >"$work/site/index.html" <<'HTML'
<!DOCTYPE html>
<html><head><title>Example shop</title><link rel="stylesheet" href="/css/site.css"></head>
<body><h1>Welcome</h1><p>Static pages only.</p><a href="/about.html">About</a></body></html>
HTML
cp "$work/site/index.html" "$work/site/about.html"
printf 'User-agent: *\nDisallow: /private/\n' >"$work/site/robots.txt"
printf 'body { font-family: sans-serif; }\n' >"$work/site/css/site.css"
head -c 1150 /dev/zero >"$work/site/favicon.ico"

# Two workers for two cores; the access log counts what the engine sent.
cat >"$work/nginx.conf" <<CONF
daemon off;
worker_processes 2;
pid $work/nginx.pid;
error_log $work/logs/error.log warn;
events { worker_connections 4096; }
http {
    log_format timed '\$msec "\$request" \$status';
    access_log $work/logs/access.log timed buffer=256k flush=1s;
    keepalive_requests 1000000;
    server {
       $listen
        root $work/site;
        server_name localhost;
    }
}
CONF
nginx -p "$work" -c "$work/nginx.conf" &
nginx_pid=$!
for _ in $(seq 50); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
done

if [ -n "${BENCH_BIN:-}" ]; then
    scanner=$BENCH_BIN
else
    (cd "$root" && cargo build --release -q -p scanfleet-scanner --bin scanfleet-scanner)
    scanner=$target_dir/release/scanfleet-scanner
fi

split_hz=${BENCH_SPLIT_HZ:-1999}
# `perf record -a` on both cores, stamped with the wall clock (as nginx's
# access log is); the output file and `--` follow.
split_record=(perf record -q -a -k CLOCK_REALTIME -F "$split_hz" -o)
wrk_cmd=(wrk -t2 -c64 -d"${wrk_seconds}s" "http://127.0.0.1:$port/")
echo "${wrk_cmd[*]}"
if [ -n "${BENCH_SPLIT:-}" ]; then
    "${split_record[@]}" "$work/wrk.perf" -- "${wrk_cmd[@]}" >"$work/wrk.txt" 2>/dev/null
else
    "${wrk_cmd[@]}" >"$work/wrk.txt"
fi
wrk_rps=$(awk '/^Requests\/sec/ {print $2}' "$work/wrk.txt")
sleep 2 # let the buffered access log reach the disk
: >"$work/logs/access.log"
kill -USR1 "$nginx_pid" # reopen the truncated log

echo "scanfleet-scanner run -t $corpus ${targets[*]} --allow-private ${BENCH_ARGS:-}"
# shellcheck disable=SC2086 # BENCH_ARGS is a list of arguments
profile=()
if [ -n "${BENCH_PROFILE:-}" ]; then
    profile=(perf record -F ${BENCH_PROFILE_HZ:-499} -g -o "$BENCH_PROFILE" --)
elif [ -n "${BENCH_CALLGRIND:-}" ]; then
    profile=(valgrind --tool=callgrind --callgrind-out-file="$BENCH_CALLGRIND")
elif [ -n "${BENCH_SPLIT:-}" ]; then
    profile=("${split_record[@]}" "$work/engine.perf" --)
fi
/usr/bin/time -v -o "$work/time.txt" "${profile[@]}" "$scanner" run -t "$corpus" "${targets[@]}" \
    --allow-private ${BENCH_ARGS:-} >"$work/findings.txt" 2>"$work/stderr.txt"
sleep 2
kill -USR1 "$nginx_pid"
sleep 0.5

received=$(wc -l <"$work/logs/access.log")
# The rate the server saw: requests over the time from the first request
# until 99.9% of them had arrived. Unlike the engine's own wall time, this
# leaves out waits for answers that never come (the corpus has a malformed
# request that the server holds until the engine's 10 s timeout).
# Also the window itself (first request, 99.9% mark, requests in it) for
# BENCH_SPLIT.
read -r span server_rate scan_from scan_to scan_requests < <(sort -n "$work/logs/access.log" | awk '
    {t[NR] = $1}
    END {
        k = int(NR * 0.999); d = t[k] - t[1]
        printf "%.2f %.0f %s %s %d\n", d, (d > 0 ? k / d : 0), t[1], t[k], k
    }')
if [ -n "${BENCH_KEEP:-}" ]; then
    cp "$work/logs/access.log" "$BENCH_KEEP.access.log"
    cp "$work/stderr.txt" "$BENCH_KEEP.stderr.txt"
    cp "$work/findings.txt" "$BENCH_KEEP.findings.txt"
fi
load=$(sed -n 's/^loaded .* in \([0-9.]*\) s$/\1/p' "$work/stderr.txt")
sent=$(sed -n 's/^\([0-9]*\) request(s) sent in .*/\1/p' "$work/stderr.txt")
scan=$(sed -n 's/^[0-9]* request(s) sent in \([0-9.]*\) s$/\1/p' "$work/stderr.txt")
wall=$(sed -n 's/.*Elapsed (wall clock) time.*: \(.*\)$/\1/p' "$work/time.txt" | awk -F: '{ if (NF == 3) print $1*3600 + $2*60 + $3; else print $1*60 + $2 }')
rss_kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/time.txt")
cpu=$(awk -F': ' '/User time|System time/ {s += $2} END {print s}' "$work/time.txt")
findings=$(wc -l <"$work/findings.txt")
tail -n 3 "$work/stderr.txt" | sed 's/^/  engine: /'

awk -v wrk="$wrk_rps" -v server_rate="$server_rate" -v span="$span" -v sent="$sent" -v received="$received" -v scan="$scan" \
    -v wall="$wall" -v cpu="$cpu" -v loadtime="$load" -v rss="$rss_kb" -v findings="$findings" 'BEGIN {
    rate = sent / scan
    printf "wrk request rate            %10.0f req/s\n", wrk
    printf "requests sent (engine)      %10d\n", sent
    printf "requests received (nginx)   %10d\n", received
    printf "findings                    %10d\n", findings
    printf "load and compile            %10.2f s\n", loadtime
    printf "scan (requests) wall time   %10.2f s\n", scan
    printf "whole run wall time         %10.2f s\n", wall
    printf "engine request rate (wall)  %10.0f req/s\n", rate
    printf "ratio to wrk (wall)         %10.3f\n", rate / wrk
    printf "first 99.9%% of requests in  %10.2f s\n", span
    printf "request rate at the server  %10.0f req/s\n", server_rate
    printf "ratio to wrk (server)       %10.3f\n", server_rate / wrk
    printf "engine CPU (user + system)  %10.2f s\n", cpu
    printf "peak RSS                    %10.1f MiB\n", rss / 1024
}'

# CPU time per request by where it was spent, from samples of both cores:
# the engine (its threads; user space and kernel apart), nginx, the load
# generator (wrk), and idle. Only samples from `from` to `to` (wall clock)
# count, over `requests` requests.
split_per_request() {
    local data=$1 from=$2 to=$3 requests=$4 label=$5
    perf script -i "$data" -F comm,tid,time,ip 2>/dev/null | awk -v from="$from" -v to="$to" \
        -v hz="$split_hz" -v n="$requests" -v label="$label" '
        {
            t = $3 + 0
            if (t < from || t > to) next
            who = $1
            if (who == "tokio-rt-worker" || who ~ /^scanfleet/ || who ~ /^rayon/) who = "engine"
            else if (who == "swapper") who = "idle"
            else if (who != "nginx" && who != "wrk") who = "other"
            side = ($4 ~ /^ffffffff/) ? "kernel" : "user"
            us[who " " side] += 1e6 / hz / n
        }
        END {
            printf "%s: CPU per request (us)\n", label
            split("engine wrk nginx other idle", order, " ")
            for (i = 1; i <= 5; i++) {
                w = order[i]
                if (us[w " user"] + us[w " kernel"] == 0) continue
                printf "  %-8s %6.1f user %6.1f kernel\n", w, us[w " user"], us[w " kernel"]
            }
        }'
}
if [ -n "${BENCH_SPLIT:-}" ]; then
    # wrk: its whole run, over the requests it made.
    read -r wrk_from wrk_to < <(perf script -i "$work/wrk.perf" -F time 2>/dev/null |
        awk 'NR == 1 {f = $1 + 0} {l = $1 + 0} END {printf "%.6f %.6f\n", f, l}')
    wrk_requests=$(awk '/requests in/ {print $1}' "$work/wrk.txt")
    split_per_request "$work/wrk.perf" "$wrk_from" "$wrk_to" "$wrk_requests" "wrk"
    # The engine: from the first request to 99.9% of them, as the rate above.
    split_per_request "$work/engine.perf" "$scan_from" "$scan_to" "$scan_requests" "engine scan"
fi
