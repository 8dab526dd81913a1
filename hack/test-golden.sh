#!/usr/bin/env bash
# test-golden.sh fails when the pinned oracles no longer give what the
# unit tests read (make test-golden):
#   - the pinned tokenizers (bin/venv-tok) run over every code point must
#     regenerate sidecar/tokenizer/tables.go byte for byte (hack/tokgen);
#   - it must encode the conformance matrix's texts to the recorded ids
#     (test/oracle/tokenizer_matrix.py check);
#   - the pinned transformers must render the chat record's conversations
#     as recorded (test/oracle/chat_oracle.py check).
# The first takes a minute of CPU; once it has passed for the same
# inputs (the pins, the generator, the tables, this Go) it is not run
# again: a stamp in the tools' cache says so.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$ROOT/bin
CACHE=${SHARDFEED_CACHE:-$HOME/.cache/shardfeed}
PY=$BIN/venv-tok/bin/python
cd "$ROOT"

key=$( (cat hack/requirements-tokenizers.txt hack/tokgen/probe.py hack/tokgen/main.go sidecar/tokenizer/tables.go go.sum; go version) | sha256sum | cut -c1-16)
stamp=$CACHE/golden-tables-$key
if [[ -e $stamp ]]; then
	echo "test-golden: the tables were regenerated identically from these inputs before ($stamp)"
else
	out=$(mktemp -d)
	trap 'rm -rf "$out"' EXIT
	echo "test-golden: running every code point through the pinned tokenizers (about a minute)"
	go run ./hack/tokgen pairs >"$out/pairs.json"
	"$PY" hack/tokgen/probe.py "$out/pairs.json" "$out/probe.json"
	go run ./hack/tokgen "$out/probe.json" >"$out/tables.go"
	if ! cmp -s "$out/tables.go" sidecar/tokenizer/tables.go; then
		echo "test-golden: the pinned tokenizers sees Unicode otherwise than sidecar/tokenizer/tables.go says: run make golden and commit" >&2
		diff "$out/tables.go" sidecar/tokenizer/tables.go | head -c 2000 >&2 || true
		exit 1
	fi
	mkdir -p "$CACHE" && touch "$stamp"
fi
echo "test-golden: encoding the conformance matrix with the pinned tokenizers"
"$PY" test/oracle/tokenizer_matrix.py check sidecar/tokenizer/testdata/conformance
echo "test-golden: rendering the chat record with the pinned transformers"
"$PY" test/oracle/chat_oracle.py check sidecar/chat/testdata/conformance
