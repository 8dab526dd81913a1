# The local cluster's layout, shared by hack/cluster-up.sh, cluster-down.sh
# and images.sh. Source it; it defines variables and functions only.
# shellcheck shell=bash disable=SC2034

WORK=${SHARDFEED_CLUSTER_DIR:-$ROOT/.cache/cluster}
RUN=$WORK/run
LOGS=$WORK/logs
IMAGES=${SHARDFEED_IMAGES_DIR:-$ROOT/.cache/images}
SOCKET=$RUN/containerd/containerd.sock

NODE=shardfeed-e2e
BRIDGE=shardfeed0
# The benchmarking range (RFC 2544), not a private one.
POD_CIDR=198.18.0.0/16
NODE_IP=198.18.0.1
SERVICE_CIDR=198.19.0.0/24
KUBERNETES_SERVICE_IP=198.19.0.1
DNS_IP=198.19.0.10

APISERVER_PORT=16443
ETCD_PORT=12379
ETCD_PEER_PORT=12380
KUBELET_PORT=11250
KUBELET_HEALTHZ_PORT=11248
KCM_PORT=11257
SCHEDULER_PORT=11259
PROXY_METRICS_PORT=11249
PROXY_HEALTHZ_PORT=11256
PORTS=("$APISERVER_PORT" "$ETCD_PORT" "$ETCD_PEER_PORT" "$KUBELET_PORT" "$KUBELET_HEALTHZ_PORT" "$KCM_PORT"
	"$SCHEDULER_PORT" "$PROXY_METRICS_PORT" "$PROXY_HEALTHZ_PORT")

# The daemons in start order; cluster-down.sh stops them in reverse.
DAEMONS=(containerd etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)

# port_free PORT: nothing listens on TCP PORT.
port_free() {
	! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# cluster_running: every daemon's PID is alive and the API server answers.
cluster_running() {
	local d pid
	for d in "${DAEMONS[@]}"; do
		pid=$(cat "$RUN/$d.pid" 2>/dev/null) || return 1
		kill -0 "$pid" 2>/dev/null || return 1
	done
	curl -sf --cacert "$WORK/pki/ca.crt" "https://$NODE_IP:$APISERVER_PORT/readyz" >/dev/null 2>&1
}
