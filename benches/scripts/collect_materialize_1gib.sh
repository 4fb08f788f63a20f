#!/usr/bin/env bash
# Throughput and peak RSS of `nokv collect` and `nokv materialize` for one 1 GiB file on the local
# directory store (issue 5). Uses the release CLI; runs each command RUNS times (default 3) on a
# fresh store under /tmp, measured with /usr/bin/time -v, checks the round trip with cmp, and
# prints one TSV line per command and run plus the medians. Everything under $WORK is deleted at
# the end (disk is limited).
#
# Usage: cargo build --release -p nokv-cli && benches/scripts/collect_materialize_1gib.sh
# Env: NOKV_BIN (default target/release/nokv), RUNS (3), SIZE_MIB (1024), WORK (mktemp -d /tmp/…)
set -euo pipefail
cd "$(dirname "$0")/../.."
NOKV_BIN=${NOKV_BIN:-target/release/nokv}
RUNS=${RUNS:-3}
SIZE_MIB=${SIZE_MIB:-1024}
WORK=${WORK:-$(mktemp -d /tmp/nokv-bench-1gib.XXXXXX)}
trap 'rm -rf "$WORK"' EXIT
[ -x "$NOKV_BIN" ] || { echo "build the release CLI first: cargo build --release -p nokv-cli" >&2; exit 1; }

src="$WORK/src.bin"
head -c "$((SIZE_MIB * 1024 * 1024))" /dev/urandom >"$src"
bytes=$(stat -c %s "$src")

# Prints "wall_seconds<TAB>peak_rss_kib" from a /usr/bin/time -v log.
parse() {
    awk -F': ' '
        /Elapsed \(wall clock\) time/ {
            n = split($2, p, ":"); s = 0
            for (i = 1; i <= n; i++) s = s * 60 + p[i]
            wall = s
        }
        /Maximum resident set size/ { rss = $2 }
        END { printf "%.3f\t%d\n", wall, rss }' "$1"
}

echo "# nokv $($NOKV_BIN --version 2>/dev/null || true); $(nproc) cores; loadavg at start: $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'command\trun\twall_s\tMB_per_s\tpeak_rss_MiB\tloadavg_1m\n'
results="$WORK/results.tsv"
: >"$results"
for run in $(seq 1 "$RUNS"); do
    store="$WORK/store-$run"
    out="$WORK/out-$run"
    /usr/bin/time -v "$NOKV_BIN" --store "$store" --quiet collect wb "$src" outputs/big.bin \
        >"$WORK/collect.out" 2>"$WORK/collect.time"
    /usr/bin/time -v "$NOKV_BIN" --store "$store" --quiet materialize wb "$out" --prefix outputs \
        >"$WORK/mat.out" 2>"$WORK/mat.time"
    cmp "$src" "$out/outputs/big.bin"
    for cmd in collect materialize; do
        log="$WORK/collect.time"
        [ "$cmd" = materialize ] && log="$WORK/mat.time"
        read -r wall rss < <(parse "$log")
        mbps=$(awk -v b="$bytes" -v w="$wall" 'BEGIN { printf "%.1f", b / 1e6 / w }')
        rss_mib=$(awk -v r="$rss" 'BEGIN { printf "%.1f", r / 1024 }')
        load=$(cut -d' ' -f1 /proc/loadavg)
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$cmd" "$run" "$wall" "$mbps" "$rss_mib" "$load" | tee -a "$results"
    done
    rm -rf "$store" "$out"
done
echo "# medians over $RUNS runs (wall s, MB/s, peak RSS MiB)"
for cmd in collect materialize; do
    for col in 3 4 5; do
        grep "^$cmd" "$results" | cut -f"$col" | sort -g | awk '{ v[NR] = $1 } END { printf "%s ", v[int((NR + 1) / 2)] }'
    done | sed "s/^/$cmd\t/"
    echo
done
