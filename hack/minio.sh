#!/usr/bin/env bash
# minio.sh runs a MinIO server for tests and development on 127.0.0.1 with a
# free port, fresh credentials and one bucket.
#
# Usage: hack/minio.sh [--bucket NAME] [--env-file FILE] [-- COMMAND [ARG...]]
#
# Without COMMAND it prints how to reach the server and runs until Ctrl-C or
# SIGTERM. With COMMAND it runs COMMAND with the AWS_* variables and
# SHARDFEED_S3_ENDPOINT set, then stops. Either way the server and its
# temporary directory are removed on exit. --env-file FILE writes the
# variables to FILE once the bucket exists; tests wait for it to appear.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${SHARDFEED_BIN:-$ROOT/bin}
LOG_PREFIX=minio
# shellcheck source=hack/lib.sh
source "$ROOT/hack/lib.sh"

bucket=shardfeed
env_out=
while (($#)); do
	case $1 in
	--bucket) bucket=${2:?--bucket needs a name}; shift 2 ;;
	--env-file) env_out=${2:?--env-file needs a file}; shift 2 ;;
	--) shift; break ;;
	-h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument '$1' (see --help)" ;;
	esac
done
[[ $bucket =~ ^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$ ]] ||
	die "bucket name '$bucket' is not valid: use 3-63 lower-case letters, digits, dots and hyphens"

need_bin minio
command -v curl >/dev/null || die "curl is missing: run 'make tools'"

dir=$(mktemp -d "${TMPDIR:-/tmp}/shardfeed-minio.XXXXXX")
pid=
cleanup() {
	local rc=$? p
	trap - EXIT INT TERM
	[[ -n $pid ]] && stop_pid "$pid" 10
	for p in $(jobs -p); do stop_pid "$p" 1; done
	[[ -n $env_out ]] && rm -f "$env_out"
	rm -rf "$dir"
	log "stopped and removed $dir"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

user=shardfeed-$(openssl rand -hex 4)
password=$(openssl rand -hex 20)
mkdir -p "$dir/data"

# start_minio starts MinIO on two free ports and waits until it is ready:
# 0 ready, 1 exited (a port taken between free_port and its bind, or a
# crash: its log says), 2 not ready in time.
start_minio() {
	{ read -r port; read -r console_port; } < <(free_ports 2)
	endpoint=http://127.0.0.1:$port
	log "starting MinIO on $endpoint"
	MINIO_ROOT_USER=$user MINIO_ROOT_PASSWORD=$password MINIO_BROWSER=off MINIO_UPDATE=off \
		"$BIN/minio" server --quiet --address "127.0.0.1:$port" --console-address "127.0.0.1:$console_port" \
		"$dir/data" >"$dir/minio.log" 2>&1 &
	pid=$!
	local start=$SECONDS
	# A first start after the tools were built, on a loaded machine, has
	# taken tens of seconds.
	while ((SECONDS - start < 90)); do
		if ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid" 2>/dev/null || true
			pid=
			return 1
		fi
		if curl -fsS "$endpoint/minio/health/ready" >/dev/null 2>&1; then
			log "MinIO ready after $((SECONDS - start)) s"
			return 0
		fi
		sleep 0.2
	done
	return 2
}

for attempt in 1 2 3; do
	rc=0
	start_minio || rc=$?
	case $rc in
	0) break ;;
	2) die "MinIO not ready in 90 s; its log:$(printf '\n'; tail -n 20 "$dir/minio.log")" ;;
	esac
	log "MinIO exited at start (attempt $attempt of 3); its log:$(printf '\n'; tail -n 20 "$dir/minio.log")"
	((attempt < 3)) || die "MinIO exited at start 3 times; see its log above"
done

# curl signs the request itself (SigV4), so no S3 client is needed here.
# On a loaded machine MinIO may still answer 503 (its object layer not
# initialized) for a moment after its readiness probe passes: retry that
# for up to 30 s; any other status is an error at once.
for ((try = 1; ; try++)); do
	status=$(curl -sS -o "$dir/bucket.out" -w '%{http_code}' -X PUT --aws-sigv4 "aws:amz:us-east-1:s3" \
		--user "$user:$password" "$endpoint/$bucket" 2>"$dir/bucket.err") || status=000
	[[ $status == 200 ]] && break
	if [[ $status != 503 && $status != 000 ]] || ((try >= 60)); then
		die "could not create bucket $bucket: HTTP $status after $try attempt(s) $(head -c 300 "$dir/bucket.err")"
	fi
	sleep 0.5
done
log "created bucket $bucket"

cat >"$dir/env" <<EOF
SHARDFEED_S3_ENDPOINT=$endpoint
SHARDFEED_S3_BUCKET=$bucket
AWS_ACCESS_KEY_ID=$user
AWS_SECRET_ACCESS_KEY=$password
AWS_REGION=us-east-1
AWS_ENDPOINT_URL=$endpoint
EOF
[[ -n $env_out ]] && cp "$dir/env" "$env_out.tmp" && mv "$env_out.tmp" "$env_out"

cat >&2 <<EOF

  endpoint    $endpoint   (S3 API, region us-east-1, path-style)
  bucket      s3://$bucket/
  access key  $user
  secret key  $password
  log         $dir/minio.log

EOF
serve_until_done "$dir/env" "$@"
