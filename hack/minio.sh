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

port=$(free_port)
console_port=$(free_port)
user=shardfeed-$(openssl rand -hex 4)
password=$(openssl rand -hex 20)
endpoint=http://127.0.0.1:$port

log "starting MinIO on $endpoint"
mkdir -p "$dir/data"
MINIO_ROOT_USER=$user MINIO_ROOT_PASSWORD=$password MINIO_BROWSER=off MINIO_UPDATE=off \
	"$BIN/minio" server --quiet --address "127.0.0.1:$port" --console-address "127.0.0.1:$console_port" \
	"$dir/data" >"$dir/minio.log" 2>&1 &
pid=$!

minio_ready() {
	kill -0 "$pid" 2>/dev/null || die "MinIO exited; its log:$(printf '\n'; tail -n 20 "$dir/minio.log")"
	curl -fsS "$endpoint/minio/health/ready"
}
wait_until 60 "MinIO" minio_ready || die "MinIO not ready in 60 s; its log:$(printf '\n'; tail -n 20 "$dir/minio.log")"

# curl signs the request itself (SigV4), so no S3 client is needed here.
curl -fsS -X PUT --aws-sigv4 "aws:amz:us-east-1:s3" --user "$user:$password" "$endpoint/$bucket" >/dev/null ||
	die "could not create bucket $bucket"
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
