#!/usr/bin/env bash
# sign-dist.sh DIR signs a release folder's SHA256SUMS and provenance with
# the release key SHARDFEED_SIGNING_KEY names (an Ed25519 private key in
# PEM, kept outside the repository): DIR/SHA256SUMS.sig and
# DIR/shardfeed-<v>.provenance.json.sig, base64 (docs/releasing.md).
# hack/dist.sh runs it when the key is set; the release workflow re-signs
# the checked build with the project's key.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd -P) # resolved, as the key's path is
LOG_PREFIX=sign
# shellcheck source=hack/lib.sh
source "$ROOT/hack/lib.sh"

DIR=${1:?usage: sign-dist.sh DIR}
KEY=${SHARDFEED_SIGNING_KEY:?set SHARDFEED_SIGNING_KEY to the release key (an Ed25519 private key in PEM)}
[[ -r $KEY ]] || die "SHARDFEED_SIGNING_KEY=$KEY is not a readable file (an Ed25519 private key in PEM: openssl genpkey -algorithm ed25519)"
case $(realpath "$KEY") in "$ROOT"/*) die "SHARDFEED_SIGNING_KEY is inside the repository: keep the release key outside it" ;; esac
openssl pkey -in "$KEY" -noout -text 2>/dev/null | grep -q '^ED25519 Private-Key' ||
	die "SHARDFEED_SIGNING_KEY=$KEY is not an Ed25519 private key in PEM (openssl genpkey -algorithm ed25519 -out KEY)"
# The folder's files are data, never run: nothing the build wrote runs
# while the key is in reach.
provenance=("$DIR"/shardfeed-*.provenance.json)
[[ ${#provenance[@]} == 1 && -f ${provenance[0]} ]] || die "$DIR holds no one shardfeed-<version>.provenance.json: build it with hack/dist.sh first"
for f in SHA256SUMS "$(basename "${provenance[0]}")"; do
	[[ -f $DIR/$f ]] || die "$DIR has no $f: build it with hack/dist.sh first"
	openssl pkeyutl -sign -inkey "$KEY" -rawin -in "$DIR/$f" | base64 -w0 >"$DIR/$f.sig"
done
log "signed $DIR/SHA256SUMS and its provenance with $KEY"
