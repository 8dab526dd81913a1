#!/usr/bin/env bash
# timed.sh runs make's test targets one after another (make test), keeps
# each one's output in bin/test-times/TARGET.log, and prints where the time
# went: each target's seconds, the slowest Go packages and Python tests.
# It fails when the targets after `tools` (whose cold build is the tool
# set-up, not the tests) took longer than TEST_BUDGET seconds by more than
# TEST_BUDGET_NOISE percent: each feature states and pays its share
# (docs/development.md, "Test time"). Only a warm run is checked: one on a
# machine where a whole run passed before with the same pins (a stamp in
# the tools' cache), so that the Go, pip and image caches are full; the
# first run of a machine fills them and is reported, not checked.
#
# A quoted argument of several targets ("test-python test-e2e") is a group:
# one make runs them side by side (-j, their shared prerequisites once),
# each one's output printed whole when it ends (--output-sync), the
# group's time one line of the table.
#
# Usage: hack/timed.sh TARGET|"TARGET TARGET..."...
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$ROOT/bin/test-times
BUDGET=${TEST_BUDGET:-1500}
NOISE=${TEST_BUDGET_NOISE:-10}
CACHE=${SHARDFEED_CACHE:-$HOME/.cache/shardfeed}
stamp=$CACHE/test-warm-$(cat "$ROOT"/go.sum "$ROOT"/hack/requirements*.txt | sha256sum | cut -c1-16)
warm=0
if [[ -e $stamp ]]; then
	warm=1
fi
rm -rf "$OUT"
mkdir -p "$OUT"

table=$OUT/targets.tsv
: >"$table"
for target in "$@"; do
	start=$(date +%s)
	read -r -a group <<<"$target"
	flags=()
	if ((${#group[@]} > 1)); then
		flags=(-j"${#group[@]}" --output-sync=target)
		echo "timed: ${group[*]} side by side; each one's output follows when it ends"
	fi
	# pipefail: the target's status, not tee's.
	if ! make --no-print-directory "${flags[@]}" -C "$ROOT" "${group[@]}" 2>&1 | tee "$OUT/${target// /+}.log"; then
		printf '%s\t%s\tfailed\n' "$target" $(($(date +%s) - start)) >>"$table"
		echo "timed: $target failed after $(($(date +%s) - start)) s (its output: $OUT/$target.log)" >&2
		exit 1
	fi
	printf '%s\t%s\tok\n' "$target" $(($(date +%s) - start)) >>"$table"
done

{
	echo "## Where make test's time went ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores)"
	echo
	echo "| target | seconds |"
	echo "|---|---:|"
	awk -F'\t' '{printf "| %s | %d |\n", $1, $2}' "$table"
	echo
	echo "Slowest Go packages (go test's own figure; several run at once):"
	echo
	cat "$OUT"/*.log | awk '$1 == "ok" && $3 ~ /s$/ {t = $3; sub(/s$/, "", t); printf "%8.1f s  %s\n", t, $2}' |
		sort -rn | awk 'NR <= 25' # awk reads to the end: head's early exit would fail sort with SIGPIPE (141) under pipefail
	echo
	echo "Slowest Python tests (pytest --durations):"
	echo
	grep -hE '^[0-9.]+s (call|setup|teardown) ' "$OUT"/*.log | sort -rn | awk 'NR <= 15' || true
	if grep -qs 'TestEndToEnd' "$OUT"/*test-e2e*.log; then
		echo
		echo "The end-to-end stories and the chaos run (each top-level test):"
		echo
		grep -hE '^--- (PASS|FAIL): Test(EndToEnd|Chaos)[^ ]* \([0-9.]+s\)' "$OUT"/*test-e2e*.log |
			sed -E 's/^--- (PASS|FAIL): ([^ ]+) \(([0-9.]+)s\)/\3 s  \2 (\1)/' | sort -rn || true
	fi
	if grep -qhE '^[0-9]+ (passed|failed).* in [0-9.]+s' "$OUT"/*.log; then
		echo
		echo "pytest's own time: $(grep -hE '^[0-9]+ (passed|failed).* in [0-9.]+s' "$OUT"/*.log | tail -1)"
	fi
} | tee "$OUT/summary.md"

mkdir -p "$CACHE" && touch "$stamp" # every target passed: this machine's caches are full now
tools=$(awk -F'\t' '$1 == "tools" {print $2}' "$table")
if ((${tools:-0} > 300)); then
	echo "timed: the tools were built in this run (${tools} s): a cold run, whose compiles the budget does not cover; it is checked on warm runs"
	exit 0
fi
if ((warm == 0)); then
	echo "timed: the first whole run on this machine with these pins (its Go test builds, pip wheels and images were made here): reported, not checked; the next run is ($stamp)"
	exit 0
fi
spent=$(awk -F'\t' '$1 != "tools" {s += $2} END {print s + 0}' "$table")
limit=$((BUDGET + BUDGET * NOISE / 100))
echo "timed: the tests took ${spent} s after the tools; the budget is ${BUDGET} s (+${NOISE} % noise: ${limit} s)"
if ((spent > limit)); then
	echo "timed: over the test-time budget by $((spent - BUDGET)) s: find what grew in $OUT/summary.md and pay for it (docs/development.md, \"Test time\"), or raise TEST_BUDGET in the Makefile with the reason" >&2
	exit 1
fi
