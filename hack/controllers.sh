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
# Its own ociarchive: hack/e2e.sh runs this beside hack/images.sh.
(cd "$ROOT" && CGO_ENABLED=0 go build -o "$work/ociarchive" ./hack/images/ociarchive)

# image NAME VERSION: the controller's image, imported into containerd.
image() {
	local name=$1 version=$2 ref=registry.local/$1:$2
	if ! ctr -a "$SOCKET" -n k8s.io images ls -q | grep -qx "$ref"; then
		"$work/ociarchive" -ref "$ref" -out "$work/$name.tar" -entrypoint /manager -user 65532:65532 \
			"$BIN/controllers/$name/manager:/manager"
		ctr -a "$SOCKET" -n k8s.io images import --no-unpack=false "$work/$name.tar" >/dev/null ||
			die "importing $name's image into the cluster's containerd failed"
		log "$ref built and imported"
	fi
}

# overlay NAME VERSION UPSTREAM_IMAGE EXTRA RESOURCES...: a kustomization
# over the module's manifests with our image and small
# requests, and EXTRA (more kustomization lines) and $PATCHES (more
# patches), rendered to $work/NAME.yaml.
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
		[[ -z ${PATCHES:-} ]] || echo "$PATCHES"
	} >"$dir/kustomization.yaml"
	# (the modules' own kustomizations warn of fields kustomize deprecated: not ours to fix)
	kubectl kustomize --load-restrictor LoadRestrictionsNone "$dir" 2> >(grep -v "is deprecated" >&2) >"$work/$name.yaml"
}

# until_admitted WHAT FILE: retries a server-side dry run of FILE until the
# controller's webhooks answer (their certificates are made at start, and
# reach the pod when the kubelet next syncs its Secret volume).
until_admitted() {
	local what=$1 file=$2 i out
	for i in $(seq 1 90); do
		if out=$(kubectl create --dry-run=server -f "$file" 2>&1); then
			return 0
		fi
		sleep 2
	done
	die "$what's webhooks do not answer: $out"
}

# prepare_NAME: the controller's image and manifests ($work/NAME.yaml), and
# its probe ($work/NAME-probe.yaml: what a server-side dry run admits once
# its webhooks answer).
prepare_jobset() {
	local m=$BIN/controllers/jobset/manifests
	image jobset "$JOBSET_VERSION"
	overlay jobset "$JOBSET_VERSION" us-central1-docker.pkg.dev/k8s-staging-images/jobset/jobset "" "$m/default"
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
}

prepare_trainer() {
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
	# Its probe: the runtime the stories train with under another name
	# (a dry run of one that exists fails); the runtime is installed once
	# admitted.
	sed 's/^  name: torch-distributed$/  name: probe/' "$m/base/runtimes/torch_distributed.yaml" >"$work/trainer-probe.yaml"
	grep -q '^  name: probe$' "$work/trainer-probe.yaml" || die "Trainer's torch-distributed runtime has moved: update hack/controllers.sh"
}

prepare_training-operator() {
	local m=$BIN/controllers/training-operator/manifests
	image training-operator "$TRAINING_OPERATOR_VERSION"
	# A PyTorchJob's workers get an init container that waits for the
	# master's DNS name with alpine's nslookup: this cluster has no DNS and
	# pulls nothing (and the restricted Pod Security level refuses that
	# container). The operator's own setting for it, an init container
	# template file, is given one that adds none.
	PATCHES=$(
		cat <<-'EOF'
			  - target: {kind: Deployment, name: training-operator}
			    patch: |-
			      - op: add
			        path: /spec/template/spec/containers/0/args
			        value: [--pytorch-init-container-template-file=/etc/training-operator/init-pytorch.yaml]
			      - op: add
			        path: /spec/template/spec/volumes/-
			        value: {name: init-pytorch, configMap: {name: training-operator-init-pytorch}}
			      - op: add
			        path: /spec/template/spec/containers/0/volumeMounts/-
			        value: {name: init-pytorch, mountPath: /etc/training-operator}
		EOF
	) overlay training-operator "$TRAINING_OPERATOR_VERSION" ghcr.io/kubeflow/training-v1/training-operator "$(
		cat <<-'EOF'
			configMapGenerator:
			  - name: training-operator-init-pytorch
			    namespace: kubeflow
			    literals: ["init-pytorch.yaml=[]"]
			    options: {disableNameSuffixHash: true}
		EOF
	)" "$m/overlays/standalone"
	cat >"$work/training-operator-probe.yaml" <<-'EOF'
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
}

prepare_kueue() {
	local m=$BIN/controllers/kueue/manifests
	image kueue "$KUEUE_VERSION"
	overlay kueue "$KUEUE_VERSION" us-central1-docker.pkg.dev/k8s-staging-images/kueue/kueue "" "$m/default"
	cat >"$work/kueue-probe.yaml" <<-'EOF'
		apiVersion: kueue.x-k8s.io/v1beta2
		kind: ResourceFlavor
		metadata: {name: probe}
	EOF
}

# Each controller's namespace and Deployment.
declare -A NAMESPACE=([jobset]=jobset-system [trainer]=kubeflow-system [training-operator]=kubeflow [kueue]=kueue-system)
declare -A DEPLOYMENT=([jobset]=jobset-controller-manager [trainer]=kubeflow-trainer-controller-manager
	[training-operator]=training-operator [kueue]=kueue-controller-manager)

# ready NAME: waits for the controller and its webhooks.
ready() {
	local name=$1 ns=${NAMESPACE[$1]} deploy=${DEPLOYMENT[$1]}
	kubectl -n "$ns" rollout status "deploy/$deploy" --timeout=240s >/dev/null ||
		die "$name did not become ready: kubectl -n $ns logs deploy/$deploy"
	until_admitted "$name" "$work/$name-probe.yaml"
	if [[ $name == trainer ]]; then
		kubectl apply --server-side --force-conflicts -f "$BIN/controllers/trainer/manifests/base/runtimes/torch_distributed.yaml" >/dev/null
	fi
	log "$name is running (namespace $ns)"
}

what=("$@")
((${#what[@]})) || what=(jobset trainer training-operator kueue)
for w in "${what[@]}"; do
	[[ -n ${NAMESPACE[$w]:-} ]] || die "unknown controller '$w': jobset, trainer, training-operator or kueue"
	"prepare_$w"
done
# Applied in order (JobSet's CRDs first: Trainer's manager watches JobSets
# from its start), then waited for side by side: most of the wait is each
# one's certificates reaching its pod.
for w in "${what[@]}"; do
	kubectl apply --server-side --force-conflicts -f "$work/$w.yaml" >/dev/null
	if [[ $w == jobset ]]; then
		kubectl wait --for condition=established --timeout=60s crd/jobsets.jobset.x-k8s.io >/dev/null
	fi
done
pids=()
for w in "${what[@]}"; do
	ready "$w" &
	pids+=($!)
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=1; done
((failed == 0)) || die "a controller did not become ready (above)"
