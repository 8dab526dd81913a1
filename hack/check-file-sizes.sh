#!/usr/bin/env bash
# Fails when a tracked file is larger than 1 MiB: binaries, downloaded tools
# and generated data sets belong in the git-ignored bin/ and .cache/.
# A data fixture that must be larger is listed in ALLOWED with why.
set -euo pipefail
cd "$(dirname "$0")/.."

LIMIT=$((1 << 20))
# path  (one per line; none today)
ALLOWED=()

status=0
while IFS= read -r -d '' path; do
	[[ -f $path && ! -L $path ]] || continue
	size=$(stat -c %s -- "$path")
	((size > LIMIT)) || continue
	for allowed in "${ALLOWED[@]}"; do
		[[ $path == "$allowed" ]] && continue 2
	done
	echo "tracked file over 1 MiB: $path ($size bytes): remove it (git rm --cached), ignore it in .gitignore, or list it in hack/check-file-sizes.sh with why" >&2
	status=1
done < <(git ls-files -z)
exit $status
