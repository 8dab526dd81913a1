#!/usr/bin/env bash
# pki.sh makes the local cluster's certificates and credentials in
# $WORK/pki: a CA, the API server's serving certificate, its client
# certificate for the kubelet, the kubelet's serving certificate, the
# aggregation layer's front-proxy CA and client certificate, the
# ServiceAccount signing key, a static token per component and a
# kubeconfig each. Run by hack/cluster-up.sh.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=hack/cluster/config.sh
source "$ROOT/hack/cluster/config.sh"
P=$WORK/pki
rm -rf "$P" && mkdir -p "$P" && chmod 700 "$P" && cd "$P"

openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj "/CN=shardfeed-e2e-ca" 2>/dev/null
# sign NAME SUBJECT [SANS]: a certificate signed by the CA; with SANS, a
# server (and client) certificate, else a client one.
sign() {
	openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
	if [[ -n ${3:-} ]]; then
		printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$3" >"$1.ext"
	else
		printf 'extendedKeyUsage=clientAuth\n' >"$1.ext"
	fi
	openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 3650 -extfile "$1.ext" 2>/dev/null
	rm -f "$1.csr" "$1.ext"
}
sign apiserver "/CN=kube-apiserver" \
	"DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:$KUBERNETES_SERVICE_IP,IP:$NODE_IP"
sign apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
sign kubelet "/CN=$NODE" "DNS:$NODE,DNS:localhost,IP:127.0.0.1,IP:$NODE_IP"
# The aggregation layer's front proxy (as kubeadm makes it): a CA of its
# own and the client certificate the API server shows aggregated APIs
# (Kueue's visibility API): without it, their discovery fails and a
# namespace's deletion waits on it for ever.
openssl req -x509 -newkey rsa:2048 -nodes -keyout front-proxy-ca.key -out front-proxy-ca.crt -days 3650 -subj "/CN=shardfeed-e2e-front-proxy-ca" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout front-proxy-client.key -out front-proxy-client.csr -subj "/CN=front-proxy-client" 2>/dev/null
printf 'extendedKeyUsage=clientAuth\n' >front-proxy-client.ext
openssl x509 -req -in front-proxy-client.csr -CA front-proxy-ca.crt -CAkey front-proxy-ca.key -CAcreateserial \
	-out front-proxy-client.crt -days 3650 -extfile front-proxy-client.ext 2>/dev/null
rm -f front-proxy-client.csr front-proxy-client.ext
openssl genrsa -out sa.key 2048 2>/dev/null
openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null

token() { head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
admin=$(token) kubelet=$(token) kcm=$(token) sched=$(token) proxy=$(token)
cat >tokens.csv <<T
$admin,admin,admin,system:masters
$kubelet,system:node:$NODE,kubelet,system:nodes
$kcm,system:kube-controller-manager,kcm
$sched,system:kube-scheduler,sched
$proxy,system:kube-proxy,kproxy
T
kubeconfig() { # FILE TOKEN
	cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters: [{name: shardfeed-e2e, cluster: {server: "https://$NODE_IP:$APISERVER_PORT", certificate-authority: "$P/ca.crt"}}]
users: [{name: user, user: {token: "$2"}}]
contexts: [{name: shardfeed-e2e, context: {cluster: shardfeed-e2e, user: user}}]
current-context: shardfeed-e2e
KC
}
kubeconfig admin.kubeconfig "$admin"
kubeconfig kubelet.kubeconfig "$kubelet"
kubeconfig kcm.kubeconfig "$kcm"
kubeconfig scheduler.kubeconfig "$sched"
kubeconfig kube-proxy.kubeconfig "$proxy"
chmod 600 ./*
