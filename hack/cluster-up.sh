#!/usr/bin/env bash
# cluster-up.sh starts a real single-node Kubernetes on this machine, for the
# end-to-end tests and `make demo`: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet and kube-proxy (built by
# `make tools`), containerd, runc and the CNI plugins (Debian packages), a
# bridge network, and images imported from local archives (hack/images.sh:
# nothing is pulled).
#
# Usage: hack/cluster-up.sh          (idempotent: a running cluster is kept)
#        hack/cluster-down.sh        (stops it and removes everything it made)
#
# Everything lives in .cache/cluster (git-ignored): configs, PKI, state,
# logs (.cache/cluster/logs), and `env`, which sets KUBECONFIG:
#   source .cache/cluster/env && kubectl get nodes
# Pods get addresses in 198.18.0.0/16 and Services in 198.19.0.0/24 (the
# benchmarking range, no private range); the node is 198.18.0.1 on its own
# bridge, and pods have no default route: nothing leaves the machine.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${SHARDFEED_BIN:-$ROOT/bin}
LOG_PREFIX=cluster-up
# shellcheck source=hack/lib.sh
source "$ROOT/hack/lib.sh"
# shellcheck source=hack/cluster/config.sh
source "$ROOT/hack/cluster/config.sh"

case ${1:-} in
-h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
"") ;;
*) die "unknown argument '$1' (see --help)" ;;
esac

# --- What the machine needs -------------------------------------------------
[[ $(id -u) == 0 ]] || die "the cluster needs root (containerd, kubelet, network and iptables): run as root"
[[ -d /sys/fs/cgroup/memory || -f /sys/fs/cgroup/cgroup.controllers ]] ||
	die "no cgroups mounted at /sys/fs/cgroup: the kubelet needs cgroup v1 or v2"
need_bin etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl
for c in containerd containerd-shim-runc-v2 runc ctr ip iptables openssl; do
	command -v "$c" >/dev/null || PATH=$PATH:/usr/sbin command -v "$c" >/dev/null ||
		die "$c is missing: run 'make tools' (it installs containerd, runc, the CNI plugins, iproute2, iptables, openssl)"
done
[[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local ]] || die "the CNI plugins are missing (/usr/lib/cni): run 'make tools'"
export PATH=$PATH:/usr/sbin

if cluster_running; then
	log "the cluster is already up (KUBECONFIG=$WORK/pki/admin.kubeconfig)"
	exit 0
fi
if [[ -d $RUN ]] && compgen -G "$RUN/*.pid" >/dev/null; then
	log "a previous cluster did not stop cleanly: tearing it down first"
	"$ROOT/hack/cluster-down.sh"
fi
for port in "${PORTS[@]}"; do
	port_free "$port" || die "port $port is in use: another cluster or program holds it (hack/cluster-down.sh stops ours)"
done
ip link show "$BRIDGE" >/dev/null 2>&1 && die "interface $BRIDGE exists already: hack/cluster-down.sh removes it"

mkdir -p "$RUN" "$LOGS" "$WORK/etc/cni"
start=$SECONDS
# cluster-down.sh removes the pods over the CRI with this.
(cd "$ROOT" && CGO_ENABLED=0 go build -o "$WORK/cricleanup" ./hack/cluster/cricleanup)
started=0
on_exit() {
	local rc=$?
	if ((rc != 0 && !started)); then
		log "start-up failed; the logs are in $LOGS; tearing down"
		"$ROOT/hack/cluster-down.sh" || true
	fi
}
trap on_exit EXIT

# launch NAME COMMAND...: start a daemon with its log and PID file.
launch() {
	local name=$1
	shift
	setsid "$@" >"$LOGS/$name.log" 2>&1 </dev/null &
	echo $! >"$RUN/$name.pid"
}

# --- Configuration and PKI --------------------------------------------------
render() { # TEMPLATE OUT
	sed -e "s|@WORK@|$WORK|g" -e "s|@NODE@|$NODE|g" -e "s|@NODE_IP@|$NODE_IP|g" -e "s|@BRIDGE@|$BRIDGE|g" \
		-e "s|@POD_CIDR@|$POD_CIDR|g" -e "s|@SERVICE_CIDR@|$SERVICE_CIDR|g" -e "s|@DNS_IP@|$DNS_IP|g" \
		-e "s|@KUBELET_PORT@|$KUBELET_PORT|g" -e "s|@KUBELET_HEALTHZ_PORT@|$KUBELET_HEALTHZ_PORT|g" \
		-e "s|@PROXY_METRICS_PORT@|$PROXY_METRICS_PORT|g" -e "s|@PROXY_HEALTHZ_PORT@|$PROXY_HEALTHZ_PORT|g" "$1" >"$2"
}
render "$ROOT/hack/cluster/etc/containerd.toml" "$WORK/etc/containerd.toml"
render "$ROOT/hack/cluster/etc/kubelet.yaml" "$WORK/etc/kubelet.yaml"
render "$ROOT/hack/cluster/etc/kube-proxy.yaml" "$WORK/etc/kube-proxy.yaml"
render "$ROOT/hack/cluster/etc/bridge.conflist" "$WORK/etc/cni/10-shardfeed.conflist"
[[ -f $WORK/pki/admin.kubeconfig ]] || "$ROOT/hack/cluster/pki.sh"
log "configuration and certificates in $WORK"

# The node's address is the bridge's: the API server advertises it, the
# kubelet serves on it, and pods reach the host (MinIO in the tests) there.
ip link add "$BRIDGE" type bridge
ip addr add "$NODE_IP/${POD_CIDR#*/}" dev "$BRIDGE"
ip link set "$BRIDGE" up
# kube-proxy's Service rules need bridged traffic to pass iptables.
# The two settings are put back by cluster-down.sh.
modprobe br_netfilter 2>/dev/null || true
for f in /proc/sys/net/ipv4/ip_forward /proc/sys/net/bridge/bridge-nf-call-iptables; do
	[[ -f $f ]] || continue
	grep -qs "^$f " "$WORK/sysctl.orig" || echo "$f $(cat "$f")" >>"$WORK/sysctl.orig"
	echo 1 >"$f"
done

# --- containerd and the images -----------------------------------------------
launch containerd containerd --config "$WORK/etc/containerd.toml"
wait_until 30 "containerd" ctr -a "$SOCKET" version || die "containerd did not start: $(tail -5 "$LOGS/containerd.log")"
[[ -f $IMAGES/pause.tar ]] || "$ROOT/hack/images.sh" pause
"$ROOT/hack/images.sh" --import-only

# --- The control plane ---------------------------------------------------------
launch etcd "$BIN/etcd" --name shardfeed-e2e --data-dir "$RUN/etcd" \
	--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
	--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
	--initial-cluster "shardfeed-e2e=http://127.0.0.1:$ETCD_PEER_PORT" --listen-metrics-urls ""
P=$WORK/pki
launch kube-apiserver "$BIN/kube-apiserver" --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
	--bind-address="$NODE_IP" --advertise-address="$NODE_IP" --secure-port="$APISERVER_PORT" \
	--tls-cert-file="$P/apiserver.crt" --tls-private-key-file="$P/apiserver.key" --client-ca-file="$P/ca.crt" \
	--service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$P/sa.pub" \
	--service-account-signing-key-file="$P/sa.key" --token-auth-file="$P/tokens.csv" \
	--authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
	--kubelet-client-certificate="$P/apiserver-kubelet-client.crt" --kubelet-client-key="$P/apiserver-kubelet-client.key" \
	--kubelet-certificate-authority="$P/ca.crt" --kubelet-preferred-address-types=InternalIP \
	--enable-aggregator-routing=true --service-cluster-ip-range="$SERVICE_CIDR" --allow-privileged=true \
	--requestheader-client-ca-file="$P/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
	--requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
	--requestheader-extra-headers-prefix=X-Remote-Extra- \
	--proxy-client-cert-file="$P/front-proxy-client.crt" --proxy-client-key-file="$P/front-proxy-client.key"
wait_until 120 "kube-apiserver" curl -sf --cacert "$P/ca.crt" "https://$NODE_IP:$APISERVER_PORT/readyz" ||
	die "kube-apiserver is not ready: $(tail -5 "$LOGS/kube-apiserver.log")"

launch kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig="$P/kcm.kubeconfig" \
	--authentication-kubeconfig="$P/kcm.kubeconfig" --authorization-kubeconfig="$P/kcm.kubeconfig" \
	--service-account-private-key-file="$P/sa.key" --root-ca-file="$P/ca.crt" --use-service-account-credentials=true \
	--cluster-signing-cert-file="$P/ca.crt" --cluster-signing-key-file="$P/ca.key" --leader-elect=false \
	--bind-address=127.0.0.1 --secure-port="$KCM_PORT" --service-cluster-ip-range="$SERVICE_CIDR"
launch kube-scheduler "$BIN/kube-scheduler" --kubeconfig="$P/scheduler.kubeconfig" \
	--authentication-kubeconfig="$P/scheduler.kubeconfig" --authorization-kubeconfig="$P/scheduler.kubeconfig" \
	--leader-elect=false --bind-address=127.0.0.1 --secure-port="$SCHEDULER_PORT"

# --- The node ----------------------------------------------------------------
launch kubelet "$BIN/kubelet" --config="$WORK/etc/kubelet.yaml" --kubeconfig="$P/kubelet.kubeconfig" \
	--hostname-override="$NODE" --node-ip="$NODE_IP" --root-dir="$RUN/kubelet" --cert-dir="$RUN/kubelet-pki"
launch kube-proxy "$BIN/kube-proxy" --config="$WORK/etc/kube-proxy.yaml"

export KUBECONFIG=$P/admin.kubeconfig
node_ready() {
	[[ $("$BIN/kubectl" get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]] &&
		"$BIN/kubectl" get serviceaccount default >/dev/null 2>&1
}
wait_until 120 "node $NODE" node_ready || die "the node is not Ready: $(tail -5 "$LOGS/kubelet.log")"
cat >"$WORK/env" <<EOF
export KUBECONFIG=$P/admin.kubeconfig
export PATH=$BIN:\$PATH
export SHARDFEED_CLUSTER_NODE_IP=$NODE_IP
EOF
started=1
log "cluster up in $((SECONDS - start)) s: source $WORK/env && kubectl get nodes"
