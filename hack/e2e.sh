#!/usr/bin/env bash
# e2e.sh runs the end-to-end test (test/e2e) and the fault-injection suite
# (test/chaos) on the local cluster: it brings the cluster up if it is not
# (hack/cluster-up.sh), builds and imports the images (hack/images.sh),
# installs the training controllers and the queue the e2e stories use
# (JobSet, Kubeflow Trainer, the training operator and Kueue:
# hack/controllers.sh), runs the tests, and takes the cluster down again
# unless it was already up or KEEP_CLUSTER=1.
#
# Usage: hack/e2e.sh
#   DEMO=1        plays the narrated demo instead of the tests
#   USE_DIST=1    installs make dist's release (dist/latest/: its image
#                 archive and packaged chart) instead of the source tree's
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
	# The controllers' installation, if it still runs.
	[[ -z ${controllers:-} ]] || kill "$controllers" 2>/dev/null || true
	if ((owned)) && [[ ${KEEP_CLUSTER:-0} != 1 ]]; then
		"$ROOT/hack/cluster-down.sh" || rc=1
	elif ((owned)); then
		log "the cluster stays up (KEEP_CLUSTER=1): source $WORK/env && kubectl get pods -A; hack/cluster-down.sh removes it"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# The training controllers the e2e stories run jobs of (built from their
# modules, hack/controllers.sh), installed while the images build and the
# other stories run: most of their two minutes is their pods starting.
# Their webhooks see only their own kinds. Kueue's do not (they mutate
# every Deployment, failing while its pod does not yet serve them), so it
# is installed once the other stories are done; its and the controllers'
# stories, then the chaos run, run with Kueue installed, as on a
# platform's cluster.
controllers=
if [[ ${DEMO:-0} != 1 && ${CHAOS:-} != full ]]; then
	"$ROOT/hack/controllers.sh" jobset trainer training-operator >"$WORK/controllers.log" 2>&1 &
	controllers=$!
fi
if [[ ${USE_DIST:-0} == 1 ]]; then
	# The release make dist wrote: its image archive and chart are what
	# the tests install (the scenarios read DIST_* from the environment).
	[[ -f $ROOT/dist/latest.env ]] || die "no release in dist/latest/: run make dist"
	set -a
	# shellcheck disable=SC1091
	source "$ROOT/dist/latest.env"
	set +a
	"$ROOT/hack/images.sh" pause trainer
	ctr -a "$SOCKET" -n k8s.io images import --no-unpack=false "$DIST_IMAGE_ARCHIVE" >/dev/null ||
		die "importing $DIST_IMAGE_ARCHIVE into the cluster's containerd failed"
	# The kubelet finds an image by digest under its digest name only
	# (a pull from a registry makes it; an import names the tag).
	ctr -a "$SOCKET" -n k8s.io images tag --force "$DIST_IMAGE_NAME" "$DIST_IMAGE" >/dev/null ||
		die "naming the release's image $DIST_IMAGE in the cluster's containerd failed"
	log "the release $DIST_VERSION: image $DIST_IMAGE, chart ${DIST_CHART#"$ROOT"/}"
else
	"$ROOT/hack/images.sh"
fi
# shellcheck disable=SC1091
source "$WORK/env"
cd "$ROOT"
if [[ ${DEMO:-0} == 1 ]]; then
	go run ./test/e2e/demo
	exit 0
fi
case ${CHAOS:-} in
"" | short)
	stories='TestEndToEndTheTrainingControllersTrainExactlyOnce|TestEndToEndKueuePreemptsAndResumesAQueuedJobExactlyOnce'
	go test -tags netgo,osusergo,e2e -count=1 -v -timeout 25m -skip "$stories" ./test/e2e/
	rc=0
	wait "$controllers" || rc=$?
	cat "$WORK/controllers.log"
	((rc == 0)) || die "installing the training controllers failed (above)"
	"$ROOT/hack/controllers.sh" kueue
	go test -tags netgo,osusergo,e2e -count=1 -v -timeout 25m -run "$stories" ./test/e2e/
	;;
full) ;;
*) die "CHAOS=${CHAOS} is not short or full" ;;
esac
case ${CHAOS:-} in
short) go test -tags netgo,osusergo,chaos -count=1 -v -short -timeout 20m ./test/chaos/ ;;
full) go test -tags netgo,osusergo,chaos -count=1 -v -timeout 85m ./test/chaos/ ;;
esac
