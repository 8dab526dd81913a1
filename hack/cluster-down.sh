#!/usr/bin/env bash
# cluster-down.sh stops the local cluster of hack/cluster-up.sh and removes
# everything it made: the pods (over the CRI, so CNI releases their
# interfaces and network namespaces), every daemon, the mounts under
# .cache/cluster, the kubelet's cgroups, the bridge, the iptables chains of
# kube-proxy and the kubelet, and the cluster's state. Idempotent: with no
# cluster it does nothing. KEEP_STATE=1 keeps .cache/cluster (logs, PKI).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${SHARDFEED_BIN:-$ROOT/bin}
LOG_PREFIX=cluster-down
# shellcheck source=hack/lib.sh
source "$ROOT/hack/lib.sh"
# shellcheck source=hack/cluster/config.sh
source "$ROOT/hack/cluster/config.sh"
export PATH=$PATH:/usr/sbin

[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
[[ -d $WORK ]] || exit 0
[[ $(id -u) == 0 ]] || die "the cluster runs as root: run cluster-down as root"

stop_daemon() {
	local pid
	pid=$(cat "$RUN/$1.pid" 2>/dev/null) || return 0
	stop_pid "$pid" "${2:-10}"
	rm -f "$RUN/$1.pid"
}

# The node first, so that nothing restarts the pods we remove.
stop_daemon kube-controller-manager
stop_daemon kube-scheduler
stop_daemon kubelet
if [[ -S $SOCKET ]]; then
	if [[ -x $WORK/cricleanup ]]; then
		"$WORK/cricleanup" "$SOCKET" || log "cricleanup failed; killing the remaining tasks"
	fi
	ns=k8s.io # the kubelet's containerd namespace
	for t in $(ctr -a "$SOCKET" -n "$ns" tasks ls -q 2>/dev/null); do ctr -a "$SOCKET" -n "$ns" tasks kill -s SIGKILL "$t" >/dev/null 2>&1; done
	sleep 0.5
	for t in $(ctr -a "$SOCKET" -n "$ns" tasks ls -q 2>/dev/null); do ctr -a "$SOCKET" -n "$ns" tasks rm -f "$t" >/dev/null 2>&1; done
fi
stop_daemon kube-proxy
stop_daemon containerd 20
stop_daemon kube-apiserver 15
stop_daemon etcd
# Shims that outlived containerd (they reparent to init).
pkill -f "containerd-shim-runc-v2 .*-address $SOCKET" 2>/dev/null || true

# Mounts under the work dir (kubelet volumes, container root filesystems,
# shm), deepest first.
grep -F " $WORK/" /proc/self/mountinfo | awk '{print $5}' | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
# The pods' network namespaces (CNI removed them unless a pod was left).
for n in $(ip netns list 2>/dev/null | awk '/^cni-/{print $1}'); do
	ip netns pids "$n" 2>/dev/null | grep -q . || ip netns delete "$n" 2>/dev/null
done
for c in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
	[[ -d $c ]] && find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null
done
ip link del "$BRIDGE" 2>/dev/null
# kube-proxy's KUBE-* chains and the kubelet's (KUBE-FIREWALL, canaries).
[[ -x $BIN/kube-proxy ]] && "$BIN/kube-proxy" --cleanup >/dev/null 2>&1
for ipt in iptables ip6tables; do
	command -v "$ipt" >/dev/null || continue
	for t in filter nat mangle; do
		for chain in $($ipt -t "$t" -S 2>/dev/null | awk '$1=="-A" && / -j KUBE-/{print $2}' | sort -u); do
			$ipt -t "$t" -S "$chain" 2>/dev/null | awk '$1=="-A" && / -j KUBE-/' | sed 's/^-A/-D/' |
				while read -r rule; do eval "$ipt -t $t $rule" 2>/dev/null; done
		done
		for chain in $($ipt -t "$t" -S 2>/dev/null | awk '$1=="-N" && $2 ~ /^KUBE-/{print $2}'); do $ipt -t "$t" -F "$chain" 2>/dev/null; done
		for chain in $($ipt -t "$t" -S 2>/dev/null | awk '$1=="-N" && $2 ~ /^KUBE-/{print $2}'); do $ipt -t "$t" -X "$chain" 2>/dev/null; done
	done
done

# The kernel settings cluster-up.sh changed, back to what they were.
if [[ -f $WORK/sysctl.orig ]]; then
	while read -r f v; do [[ -f $f ]] && echo "$v" >"$f" 2>/dev/null; done <"$WORK/sysctl.orig"
	rm -f "$WORK/sysctl.orig"
fi

if [[ ${KEEP_STATE:-0} == 1 ]]; then
	rm -rf "$RUN"
	log "cluster stopped; logs and PKI kept in $WORK"
else
	rm -rf "$WORK"
	log "cluster stopped and removed"
fi
