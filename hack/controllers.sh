#!/usr/bin/env bash
# controllers.sh installs the training controllers platform teams run into
# the local cluster (hack/cluster-up.sh), for the end-to-end and chaos
# suites: JobSet, Kubeflow Trainer v2 (TrainJob, with its torch-distributed
# runtime), the Kubeflow training operator (PyTorchJob) and Kueue. Each is
# built from its released Go module (hack/tools.sh controllers, versions in
# hack/versions.sh), made an OCI image with the project's image tooling
# (registry.local/<name>:<version>: no container engine, no registry),
# imported into the cluster's containerd, and installed from its own
# module's kustomize manifests through an overlay that changes only the
# image (pulled never) and the requests (a two-core node).
#
# Usage: hack/controllers.sh [jobset|trainer|training-operator|kueue]...
#        (default: all four, in that order; Trainer runs on JobSet, Kueue
#        last so that it finds the job kinds it integrates with)
# Idempotent: a controller already running at its version is kept.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${SHARDFEED_BIN:-$ROOT/bin}
LOG_PREFIX=controllers
# shellcheck source=hack/lib.sh
source "$ROOT/hack/lib.sh"
# shellcheck source=hack/cluster/config.sh
source "$ROOT/hack/cluster/config.sh"
# shellcheck source=hack/versions.sh
source "$ROOT/hack/versions.sh"
export PATH=$PATH:/usr/sbin

case ${1:-} in
-h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
cluster_running || die "the local cluster is not up: hack/cluster-up.sh (make cluster-up)"
# shellcheck disable=SC1091
source "$WORK/env"
"$ROOT/hack/tools.sh" controllers
work=$IMAGES/controllers
mkdir -p "$work"
(cd "$ROOT" && CGO_ENABLED=0 go build -o "$IMAGES/bin/ociarchive" ./hack/images/ociarchive)

# image NAME VERSION: the controller's image, imported into containerd.
image() {
	local name=$1 version=$2 ref=registry.local/$1:$2
	if ! ctr -a "$SOCKET" -n k8s.io images ls -q | grep -qx "$ref"; then
		"$IMAGES/bin/ociarchive" -ref "$ref" -out "$work/$name.tar" -entrypoint /manager -user 65532:65532 \
			"$BIN/controllers/$name/manager:/manager"
		ctr -a "$SOCKET" -n k8s.io images import --no-unpack=false "$work/$name.tar" >/dev/null ||
			die "importing $name's image into the cluster's containerd failed"
		log "$ref built and imported"
	fi
}

# overlay NAME VERSION UPSTREAM_IMAGE EXTRA RESOURCES...: a kustomization
# over the module's manifests with our image and small
# requests, and EXTRA (more kustomization lines), rendered to
# $work/NAME.yaml.
overlay() {
	local name=$1 version=$2 upstream=$3 extra=$4
	shift 4
	local dir=$work/$name-overlay r
	rm -rf "$dir" && mkdir -p "$dir"
	{
		echo "apiVersion: kustomize.config.k8s.io/v1beta1"
		echo "kind: Kustomization"
		echo "resources:"
		# kustomize takes a directory by a relative path only.
		for r in "$@"; do echo "  - $(realpath --relative-to="$dir" "$r")"; done
		echo "images:"
		echo "  - name: $upstream"
		echo "    newName: registry.local/$name"
		echo "    newTag: $version"
		[[ -z $extra ]] || echo "$extra"
		cat <<-'EOF'
			patches:
			  - target: {kind: Deployment}
			    patch: |-
			      - op: replace
			        path: /spec/template/spec/containers/0/imagePullPolicy
			        value: Never
			      - op: replace
			        path: /spec/template/spec/containers/0/resources
			        value: {requests: {cpu: 10m, memory: 64Mi}}
		EOF
	} >"$dir/kustomization.yaml"
	# (the modules' own kustomizations warn of fields kustomize deprecated: not ours to fix)
	kubectl kustomize --load-restrictor LoadRestrictionsNone "$dir" 2> >(grep -v "is deprecated" >&2) >"$work/$name.yaml"
}

# apply NAME NAMESPACE DEPLOYMENT: installs the rendered manifests and waits
# for the controller.
apply() {
	local name=$1 ns=$2 deploy=$3
	kubectl apply --server-side --force-conflicts -f "$work/$name.yaml" >/dev/null
	kubectl -n "$ns" rollout status "deploy/$deploy" --timeout=240s >/dev/null ||
		die "$name did not become ready: kubectl -n $ns logs deploy/$deploy"
	log "$name is running (namespace $ns)"
}

# until_admitted WHAT FILE: retries a server-side dry run of FILE until the
# controller's webhooks answer (their certificates are made at start).
until_admitted() {
	local what=$1 file=$2 i out
	for i in $(seq 1 60); do
		if out=$(kubectl create --dry-run=server -f "$file" 2>&1); then
			return 0
		fi
		sleep 2
	done
	die "$what's webhooks do not answer: $out"
}

install_jobset() {
	local m=$BIN/controllers/jobset/manifests
	image jobset "$JOBSET_VERSION"
	overlay jobset "$JOBSET_VERSION" us-central1-docker.pkg.dev/k8s-staging-images/jobset/jobset "" "$m/default"
	apply jobset jobset-system jobset-controller-manager
	cat >"$work/jobset-probe.yaml" <<-'EOF'
		apiVersion: jobset.x-k8s.io/v1alpha2
		kind: JobSet
		metadata: {name: probe, namespace: default}
		spec:
		  replicatedJobs:
		  - name: w
		    template:
		      spec:
		        template:
		          spec:
		            restartPolicy: Never
		            containers: [{name: c, image: registry.local/pause:e2e}]
	EOF
	until_admitted JobSet "$work/jobset-probe.yaml"
}

install_trainer() {
	local m=$BIN/controllers/trainer/manifests
	image trainer "$TRAINER_VERSION"
	# The module's manager overlay, less its JobSet (a download: ours is
	# installed from its own module).
	overlay trainer "$TRAINER_VERSION" ghcr.io/kubeflow/trainer/trainer-controller-manager "$(
		cat <<-EOF
			namespace: kubeflow-system
			secretGenerator:
			  - name: kubeflow-trainer-webhook-cert
			    options: {disableNameSuffixHash: true}
			configMapGenerator:
			  - name: kubeflow-trainer-public
			    literals: [kubeflow_trainer_version=$TRAINER_VERSION]
			    options: {disableNameSuffixHash: true}
		EOF
	)" "$m/overlays/manager/namespace.yaml" "$m/base/crds" "$m/base/manager" "$m/base/rbac" "$m/base/webhook"
	apply trainer kubeflow-system kubeflow-trainer-controller-manager
	until_admitted "Kubeflow Trainer" "$m/base/runtimes/torch_distributed.yaml"
	kubectl apply --server-side --force-conflicts -f "$m/base/runtimes/torch_distributed.yaml" >/dev/null
	log "ClusterTrainingRuntime torch-distributed installed"
}

install_training_operator() {
	local m=$BIN/controllers/training-operator/manifests
	image training-operator "$TRAINING_OPERATOR_VERSION"
	overlay training-operator "$TRAINING_OPERATOR_VERSION" ghcr.io/kubeflow/training-v1/training-operator "" "$m/overlays/standalone"
	apply training-operator kubeflow training-operator
	cat >"$work/pytorchjob-probe.yaml" <<-'EOF'
		apiVersion: kubeflow.org/v1
		kind: PyTorchJob
		metadata: {name: probe, namespace: default}
		spec:
		  pytorchReplicaSpecs:
		    Master:
		      replicas: 1
		      template:
		        spec:
		          containers: [{name: pytorch, image: registry.local/pause:e2e}]
	EOF
	until_admitted "the training operator" "$work/pytorchjob-probe.yaml"
}

install_kueue() {
	local m=$BIN/controllers/kueue/manifests
	image kueue "$KUEUE_VERSION"
	overlay kueue "$KUEUE_VERSION" us-central1-docker.pkg.dev/k8s-staging-images/kueue/kueue "" "$m/default"
	apply kueue kueue-system kueue-controller-manager
	cat >"$work/kueue-probe.yaml" <<-'EOF'
		apiVersion: kueue.x-k8s.io/v1beta2
		kind: ResourceFlavor
		metadata: {name: probe}
	EOF
	until_admitted Kueue "$work/kueue-probe.yaml"
}

what=("$@")
((${#what[@]})) || what=(jobset trainer training-operator kueue)
for w in "${what[@]}"; do
	case $w in
	jobset) install_jobset ;;
	trainer) install_trainer ;;
	training-operator) install_training_operator ;;
	kueue) install_kueue ;;
	*) die "unknown controller '$w': jobset, trainer, training-operator or kueue" ;;
	esac
done
