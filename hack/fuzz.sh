#!/usr/bin/env bash
# fuzz.sh runs every Go fuzz target of the project (every `func FuzzXxx` in
# a _test.go file) for FUZZ_TIME each, one after the other, and prints a
# table of targets, executions and findings (also written to
# bin/fuzz/results.md, with each target's log beside it).
#
# Usage: hack/fuzz.sh [REGEX]     only the targets whose package/name match
#
# Run over every target (no REGEX), it also writes the table into
# docs/reliability.md, between its fuzz markers.
#
# A finding is a failing input: go test writes it under the package's
# testdata/fuzz/FuzzXxx/, where it becomes part of the committed seed
# corpus once the bug is fixed. The script exits non-zero if any target
# found one.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
LOG_PREFIX=fuzz
# shellcheck source=hack/lib.sh
source "$ROOT/hack/lib.sh"

fuzz_time=${FUZZ_TIME:-30s}
# Go minimizes each new input for up to a minute by default, during which a
# target whose seeds are whole files (a tar's blocks) runs nothing new: 2 s
# keeps the time for fuzzing (FUZZ_MINIMIZE_TIME).
minimize_time=${FUZZ_MINIMIZE_TIME:-2s}
filter=${1:-.}
out=$ROOT/bin/fuzz
mkdir -p "$out"
cd "$ROOT"

# Each target as "package name file".
mapfile -t targets < <(grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' . |
	grep -v '^./bin/' | sed -E 's|^\./((.*)/[^/]*_test\.go):func (Fuzz.*)$|\2 \3 \1|' | sort -u | grep -E -- "$filter" || true)
((${#targets[@]})) || die "no fuzz target matches '$filter'"
log "${#targets[@]} targets, $fuzz_time each (FUZZ_TIME)"

table="| package | target | time | executions | new inputs kept | findings |
| --- | --- | --- | --- | --- | --- |"
failed=0
for t in "${targets[@]}"; do
	read -r pkg name file <<<"$t"
	logf=$out/$(echo "$pkg" | tr / _)-$name.log
	log "$pkg $name"
	# A target of the video decoder's cgo build (//go:build ffmpeg) runs
	# in it, on make tools-video's FFmpeg.
	build=()
	if head -1 "$file" | grep -q '^//go:build ffmpeg'; then
		[[ -d $ROOT/bin/ffmpeg-lgpl/lib/pkgconfig ]] || die "$name needs FFmpeg's libraries: run make tools-video"
		build=(env PKG_CONFIG_PATH="$ROOT/bin/ffmpeg-lgpl/lib/pkgconfig" CGO_ENABLED=1 go test -tags "netgo,osusergo,ffmpeg")
	else
		build=(go test)
	fi
	status=0
	"${build[@]}" -run '^$' -fuzz "^$name\$" -fuzztime "$fuzz_time" -fuzzminimizetime "$minimize_time" "./$pkg" >"$logf" 2>&1 || status=$?
	execs=$(grep -oE 'execs: [0-9]+' "$logf" | tail -1 | grep -oE '[0-9]+' || echo 0)
	kept=$(grep -oE 'new interesting: [0-9]+' "$logf" | tail -1 | grep -oE '[0-9]+' || echo 0)
	finding=0
	if ((status)); then
		finding=1 failed=1
		grep -E 'Failing input written to|--- FAIL|panic:' "$logf" | head -5 >&2 || true
	fi
	table+=$'\n'"| \`$pkg\` | \`$name\` | $fuzz_time | $execs | $kept | $finding |"
done
printf '%s\n' "$table" | tee "$out/results.md"
((failed == 0)) || die "a target found a failing input: see $out/*.log and the package's testdata/fuzz/"
if [[ $filter == . ]]; then
	{
		echo "Command: \`make fuzz FUZZ_TIME=$fuzz_time\`, $(date -u +%Y-%m-%d), $(nproc) cores, $(go version | cut -d' ' -f3)."
		echo
		cat "$out/results.md"
	} >"$out/block.md"
	python3 - "$ROOT/docs/reliability.md" "$out/block.md" <<'PY'
import re, sys
doc, block = open(sys.argv[1]).read(), open(sys.argv[2]).read().rstrip("\n")
new, n = re.subn(r"(<!-- fuzz -->\n)(?:.*?\n)?(<!-- /fuzz -->)", lambda m: m.group(1) + block + "\n" + m.group(2), doc, flags=re.S)
if not n:
    sys.exit(f"{sys.argv[1]} has no <!-- fuzz --> … <!-- /fuzz --> block")
open(sys.argv[1], "w").write(new)
PY
	log "docs/reliability.md: fuzzing table updated"
fi
log "no findings; the table is in $out/results.md"
