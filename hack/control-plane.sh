#!/usr/bin/env bash
# control-plane.sh runs a Kubernetes control plane for tests and development:
# etcd and kube-apiserver on 127.0.0.1 with free ports, and a kubeconfig with
# admin rights (a token in the system:masters group).
#
# Usage: hack/control-plane.sh [--env-file FILE] [-- COMMAND [ARG...]]
#
# Without COMMAND it prints how to reach the API server and runs until Ctrl-C
# or SIGTERM. With COMMAND it runs COMMAND with KUBECONFIG set, then stops.
# Either way every process and the temporary directory are removed on exit.
# --env-file FILE writes the variables (KUBECONFIG, SHARDFEED_APISERVER, ...)
# to FILE once the API server is ready; tests wait for it to appear.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${SHARDFEED_BIN:-$ROOT/bin}
LOG_PREFIX=control-plane
# shellcheck source=hack/lib.sh
source "$ROOT/hack/lib.sh"

env_out=
while (($#)); do
	case $1 in
	--env-file) env_out=${2:?--env-file needs a file}; shift 2 ;;
	--) shift; break ;;
	-h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument '$1' (see --help)" ;;
	esac
done

need_bin etcd kube-apiserver kubectl
command -v openssl >/dev/null || die "openssl is missing: run 'make tools'"

dir=$(mktemp -d "${TMPDIR:-/tmp}/shardfeed-control-plane.XXXXXX")
pids=()
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	local p
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do stop_pid "${pids[i]}" 15; done
	for p in $(jobs -p); do stop_pid "$p" 1; done
	[[ -n $env_out ]] && rm -f "$env_out"
	rm -rf "$dir"
	log "stopped and removed $dir"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

{ read -r etcd_port; read -r peer_port; read -r api_port; } < <(free_ports 3)

log "generating certificates in $dir/pki"
mkdir -p "$dir/pki" "$dir/etcd"
(
	cd "$dir/pki"
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=shardfeed-test-ca \
		-keyout ca.key -out ca.crt 2>/dev/null
	openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver -keyout apiserver.key -out apiserver.csr 2>/dev/null
	printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\n' >apiserver.ext
	openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
		-extfile apiserver.ext -out apiserver.crt 2>/dev/null
	openssl genrsa -out sa.key 2048 2>/dev/null
	openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
)
token=$(openssl rand -hex 24)
printf '%s,admin,admin,system:masters\n' "$token" >"$dir/pki/tokens.csv"

log "starting etcd on 127.0.0.1:$etcd_port"
"$BIN/etcd" --name default --data-dir "$dir/etcd" \
	--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
	--listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
	--initial-cluster "default=http://127.0.0.1:$peer_port" >"$dir/etcd.log" 2>&1 &
pids+=($!)

log "starting kube-apiserver on https://127.0.0.1:$api_port"
# ServiceAccount admission is off: there is no controller-manager to create
# the default ServiceAccounts it would require.
"$BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
	--bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
	--tls-cert-file "$dir/pki/apiserver.crt" --tls-private-key-file "$dir/pki/apiserver.key" \
	--client-ca-file "$dir/pki/ca.crt" --token-auth-file "$dir/pki/tokens.csv" \
	--authorization-mode RBAC --allow-privileged=true \
	--service-cluster-ip-range 198.19.0.0/24 --disable-admission-plugins ServiceAccount \
	--service-account-issuer https://kubernetes.default.svc \
	--service-account-key-file "$dir/pki/sa.pub" --service-account-signing-key-file "$dir/pki/sa.key" \
	>"$dir/kube-apiserver.log" 2>&1 &
pids+=($!)

kubeconfig=$dir/kubeconfig
"$BIN/kubectl" config --kubeconfig "$kubeconfig" set-cluster shardfeed-test \
	--server "https://127.0.0.1:$api_port" --certificate-authority "$dir/pki/ca.crt" --embed-certs >/dev/null
"$BIN/kubectl" config --kubeconfig "$kubeconfig" set-credentials admin --token "$token" >/dev/null
"$BIN/kubectl" config --kubeconfig "$kubeconfig" set-context shardfeed-test --cluster shardfeed-test --user admin >/dev/null
"$BIN/kubectl" config --kubeconfig "$kubeconfig" use-context shardfeed-test >/dev/null

# Not wait_until: a process that exits must be said, with its log, at once
# (a check inside wait_until has its output hidden).
start=$SECONDS
until "$BIN/kubectl" --kubeconfig "$kubeconfig" get --raw /readyz >/dev/null 2>&1; do
	kill -0 "${pids[0]}" 2>/dev/null || die "etcd exited; its log:$(printf '\n'; tail -n 20 "$dir/etcd.log")"
	kill -0 "${pids[1]}" 2>/dev/null || die "kube-apiserver exited; its log:$(printf '\n'; tail -n 20 "$dir/kube-apiserver.log")"
	((SECONDS - start < 90)) || die "kube-apiserver not ready in 90 s; its log:$(printf '\n'; tail -n 20 "$dir/kube-apiserver.log")"
	sleep 0.2
done
log "kube-apiserver ready after $((SECONDS - start)) s"

cat >"$dir/env" <<EOF
KUBECONFIG=$kubeconfig
SHARDFEED_APISERVER=https://127.0.0.1:$api_port
SHARDFEED_APISERVER_TOKEN=$token
SHARDFEED_APISERVER_CA=$dir/pki/ca.crt
SHARDFEED_ETCD=http://127.0.0.1:$etcd_port
EOF
[[ -n $env_out ]] && cp "$dir/env" "$env_out.tmp" && mv "$env_out.tmp" "$env_out"

cat >&2 <<EOF

  API server  https://127.0.0.1:$api_port (admin token in the kubeconfig)
  etcd        http://127.0.0.1:$etcd_port
  logs        $dir/*.log

  export KUBECONFIG=$kubeconfig
  kubectl get namespaces

EOF
serve_until_done "$dir/env" "$@"
