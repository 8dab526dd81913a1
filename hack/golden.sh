#!/usr/bin/env bash
# golden.sh records the oracles the unit tests read (make golden) or fails
# when the pinned oracles no longer give what they read (make test-golden).
#
#   hack/golden.sh record   re-records every oracle in place
#   hack/golden.sh check    re-records into a temporary folder and fails on
#                           any difference
#
# The oracles:
#   - the tokenizer's Unicode tables: the pinned tokenizers (bin/venv-tok)
#     run over every code point regenerates sidecar/tokenizer/tables.go
#     byte for byte (hack/tokgen);
#   - the tokenizer's conformance matrix and the chat templates' record,
#     checked by encoding and rendering the recorded texts again
#     (test/oracle/tokenizer_matrix.py, chat_oracle.py check);
#   - each format's recorded oracle (FORMATS below): what the format's own
#     project writes, and what its own reader returns, in the package's
#     testdata/golden (test/oracle/NAME_oracle.py record). A check records
#     it afresh, fails when an answer or the manifest changed, and runs the
#     package's golden tests on the fresh inputs (SHARDFEED_GOLDEN), so a
#     writer that changed under its pin fails too.
# Each check that passed leaves a stamp in the tools' cache keyed by what
# it read (the pins, the oracle's script, the recording, the reader's Go
# files, this Go): the same inputs are not checked twice, so a warm make
# test pays nothing here and a cold one a few minutes.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$ROOT/bin
CACHE=${SHARDFEED_CACHE:-$HOME/.cache/shardfeed}
TOK=$BIN/venv-tok/bin/python
cd "$ROOT"
mode=${1:-check}

# oracle script, its venv, the package whose testdata/golden it records,
# and the package's golden tests (go test -run).
FORMATS=(
	"test/oracle/megatron_oracle.py venv-oracle sidecar/format/megatron TestMegatron"
	"test/oracle/litdata_oracle.py venv-oracle sidecar/format/litdata TestLitData"
	"test/oracle/webdataset_oracle.py venv-oracle sidecar/format/webdataset TestWebDataset"
	"test/oracle/hf_oracle.py venv-hf sidecar/format/huggingface TestHuggingFace"
	"test/oracle/mds_oracle.py venv-oracle sidecar/format/mds TestReadsWhatMosaicMLStreamingWrites"
	"test/oracle/lance_oracle.py venv-oracle sidecar/format/lance/lancetable TestPylanceTables"
	"test/oracle/lerobot_oracle.py venv-lerobot sidecar/format/lerobot TestLeRobot"
	"test/orc/files.py venv sidecar/format/orc/orcfile TestPyarrowFiles"
)

say() { printf 'golden: %s\n' "$*"; }

tables() {
	local out=$1
	go run ./hack/tokgen pairs >"$out/pairs.json"
	"$TOK" hack/tokgen/probe.py "$out/pairs.json" "$out/probe.json"
	go run ./hack/tokgen "$out/probe.json" >"$out/tables.go"
}

record() {
	local out script venv pkg tests
	out=$(mktemp -d)
	trap 'rm -rf "$out"' RETURN
	say "the tokenizer's Unicode tables (every code point through the pinned tokenizers: about a minute)"
	tables "$out"
	cp "$out/tables.go" sidecar/tokenizer/tables.go
	say "the tokenizer's conformance matrix"
	rm -rf sidecar/tokenizer/testdata/conformance
	"$TOK" test/oracle/tokenizer_matrix.py record sidecar/tokenizer/testdata/conformance
	say "the chat templates' record"
	rm -rf sidecar/chat/testdata/conformance
	"$TOK" test/oracle/chat_oracle.py record sidecar/chat/testdata/conformance
	for row in "${FORMATS[@]}"; do
		read -r script venv pkg tests <<<"$row"
		say "$pkg/testdata/golden ($script)"
		quietly "$BIN/$venv/bin/python" "$script" record "$pkg/testdata/golden"
	done
}

# answers lists the answer files (and manifests) of two recordings, each
# once: one that only one of them has differs too.
answers() {
	local d
	for d in "$@"; do
		(cd "$d" && find . \( -name manifest.json -o -name '*.jsonl' \) -printf '%P\n')
	done | sort -u
}

# digest hashes files and folders (their paths and bytes) into a stamp's
# key, with this Go's version.
digest() {
	{
		find "$@" -type f -print0 | sort -z | xargs -0 sha256sum
		go version
	} | sha256sum | cut -c1-16
}

# passed says whether a check with this key passed before (a stamp in the
# tools' cache); pass records that it did. A check is the pinned oracle
# over the recorded inputs: the same pins, scripts and recording give the
# same answer, so a warm make test does not pay for it twice.
passed() { [[ -e $CACHE/golden-$1 ]]; }
pass() { mkdir -p "$CACHE" && touch "$CACHE/golden-$1"; }

# quietly runs an oracle with its chatter (progress bars, warnings) in a
# log shown only when it fails.
quietly() {
	local log
	log=$(mktemp)
	if ! "$@" >"$log" 2>&1; then
		cat "$log" >&2
		rm -f "$log"
		return 1
	fi
	rm -f "$log"
}

check() {
	local out key script venv pkg tests fresh changed f
	out=$(mktemp -d)
	trap 'rm -rf "$out"' RETURN
	key=tables-$(digest hack/requirements-tokenizers.txt hack/tokgen/probe.py hack/tokgen/main.go sidecar/tokenizer/tables.go go.sum)
	if passed "$key"; then
		say "the tokenizer's tables: checked before with these pins and this Go ($CACHE/golden-$key)"
	else
		say "running every code point through the pinned tokenizers (about a minute)"
		tables "$out"
		if ! cmp -s "$out/tables.go" sidecar/tokenizer/tables.go; then
			echo "golden: the pinned tokenizers sees Unicode otherwise than sidecar/tokenizer/tables.go says: run make golden and commit" >&2
			diff "$out/tables.go" sidecar/tokenizer/tables.go | head -c 2000 >&2 || true
			return 1
		fi
		pass "$key"
	fi
	key=tokenizer-$(digest hack/requirements-tokenizers.txt test/oracle/tokenizer_matrix.py sidecar/tokenizer/testdata/conformance)
	if passed "$key"; then
		say "the tokenizer's matrix: checked before with these pins"
	else
		say "encoding the conformance matrix with the pinned tokenizers"
		"$TOK" test/oracle/tokenizer_matrix.py check sidecar/tokenizer/testdata/conformance
		pass "$key"
	fi
	key=chat-$(digest hack/requirements-tokenizers.txt test/oracle/chat_oracle.py test/oracle/chat_templates sidecar/chat/testdata/conformance)
	if passed "$key"; then
		say "the chat record: checked before with these pins"
	else
		say "rendering the chat record with the pinned transformers"
		quietly "$TOK" test/oracle/chat_oracle.py check sidecar/chat/testdata/conformance
		pass "$key"
	fi
	for row in "${FORMATS[@]}"; do
		read -r script venv pkg tests <<<"$row"
		key=${pkg##*/}-$(digest "hack/requirements${venv#venv}.txt" "$script" test/oracle/golden.py "$pkg/testdata/golden" "$pkg"/*.go)
		if passed "$key"; then
			say "$pkg: checked before with these pins, this recording and this reader"
			continue
		fi
		fresh=$out/${pkg//\//_}
		say "$pkg: recording afresh ($script)"
		quietly "$BIN/$venv/bin/python" "$script" record "$fresh"
		# The answers and the manifest must be the committed ones; the
		# inputs may differ in bytes (a writer's names or timestamps), so
		# the golden tests read the fresh ones too.
		changed=0
		while IFS= read -r f; do
			if ! cmp -s "$fresh/$f" "$pkg/testdata/golden/$f"; then
				echo "golden: $pkg/testdata/golden/$f is not what the pinned oracle gives now: run make golden, read the difference and commit" >&2
				diff "$fresh/$f" "$pkg/testdata/golden/$f" 2>&1 | head -c 1500 >&2 || true
				changed=1
			fi
		done < <(answers "$fresh" "$pkg/testdata/golden")
		if [[ $changed == 1 ]]; then
			return 1
		fi
		say "$pkg: the golden tests on the fresh recording"
		SHARDFEED_GOLDEN=$fresh go test -count=1 -run "$tests" "./$pkg/"
		pass "$key"
	done
}

case $mode in
record) record ;;
check) check ;;
*)
	echo "usage: hack/golden.sh record|check" >&2
	exit 2
	;;
esac
