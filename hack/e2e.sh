#!/usr/bin/env bash
# e2e.sh runs the end-to-end test (test/e2e) and the fault-injection suite
# (test/chaos) on the local cluster: it brings the cluster up if it is not
# (hack/cluster-up.sh), builds and imports the images (hack/images.sh), runs
# the tests, and takes the cluster down again unless it was already up or
# KEEP_CLUSTER=1.
#
# Usage: hack/e2e.sh
#   DEMO=1        plays the narrated demo instead of the tests
#   CHAOS=short   after the e2e test, the short chaos run (make test)
#   CHAOS=full    only the whole chaos suite (make test-chaos); CHAOS_SEED,
#                 CHAOS_SCENARIOS (names, comma-separated), CHAOS_TABLE (a
#                 file for the results table) pass through
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${SHARDFEED_BIN:-$ROOT/bin}
LOG_PREFIX=${LOG_PREFIX:-e2e}
# shellcheck source=hack/lib.sh
source "$ROOT/hack/lib.sh"
# shellcheck source=hack/cluster/config.sh
source "$ROOT/hack/cluster/config.sh"

[[ $(id -u) == 0 ]] || die "the end-to-end test runs a real cluster, which needs root"
owned=0
if ! cluster_running; then
	owned=1
	"$ROOT/hack/cluster-up.sh"
fi
cleanup() {
	local rc=$?
	if ((owned)) && [[ ${KEEP_CLUSTER:-0} != 1 ]]; then
		"$ROOT/hack/cluster-down.sh" || rc=1
	elif ((owned)); then
		log "the cluster stays up (KEEP_CLUSTER=1): source $WORK/env && kubectl get pods -A; hack/cluster-down.sh removes it"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
"$ROOT/hack/images.sh"
# shellcheck disable=SC1091
source "$WORK/env"
cd "$ROOT"
if [[ ${DEMO:-0} == 1 ]]; then
	go run ./test/e2e/demo
	exit 0
fi
case ${CHAOS:-} in
"" | short) go test -tags e2e -count=1 -v -timeout 20m ./test/e2e/ ;;
full) ;;
*) die "CHAOS=${CHAOS} is not short or full" ;;
esac
case ${CHAOS:-} in
short) go test -tags chaos -count=1 -v -short -timeout 20m ./test/chaos/ ;;
full) go test -tags chaos -count=1 -v -timeout 85m ./test/chaos/ ;;
esac
