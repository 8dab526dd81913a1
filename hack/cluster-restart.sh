#!/usr/bin/env bash
# cluster-restart.sh kills one daemon of the local cluster (SIGKILL, as a
# crash would) and starts it again with the same command line, after an
# optional pause: the chaos suite (test/chaos) restarts kube-apiserver with
# it. It waits until a restarted kube-apiserver answers /readyz.
#
# Usage: hack/cluster-restart.sh DAEMON [DOWN_SECONDS]
#   DAEMON is one of hack/cluster/config.sh's DAEMONS (e.g. kube-apiserver)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
LOG_PREFIX=cluster-restart
# shellcheck source=hack/lib.sh
source "$ROOT/hack/lib.sh"
# shellcheck source=hack/cluster/config.sh
source "$ROOT/hack/cluster/config.sh"

case ${1:-} in
"" | -h | --help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
daemon=$1
down=${2:-0}
[[ " ${DAEMONS[*]} " == *" $daemon "* ]] || die "unknown daemon '$daemon': one of ${DAEMONS[*]}"
pidfile=$RUN/$daemon.pid
pid=$(cat "$pidfile" 2>/dev/null) || die "$daemon has no PID file in $RUN: is the cluster up (hack/cluster-up.sh)?"
kill -0 "$pid" 2>/dev/null || die "$daemon (PID $pid) is not running"
mapfile -d '' cmdline <"/proc/$pid/cmdline"
((${#cmdline[@]} > 0)) || die "cannot read the command line of $daemon (PID $pid)"

kill -KILL "$pid"
for _ in $(seq 100); do
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
kill -0 "$pid" 2>/dev/null && die "$daemon (PID $pid) did not die"
log "killed $daemon (PID $pid); starting it again in ${down}s"
sleep "$down"
setsid "${cmdline[@]}" >>"$LOGS/$daemon.log" 2>&1 </dev/null &
echo $! >"$pidfile"
if [[ $daemon == kube-apiserver ]]; then
	wait_until 120 "kube-apiserver" curl -sf --cacert "$WORK/pki/ca.crt" "https://$NODE_IP:$APISERVER_PORT/readyz" ||
		die "kube-apiserver is not ready again: $(tail -5 "$LOGS/kube-apiserver.log")"
fi
log "$daemon is back (PID $(cat "$pidfile"))"
