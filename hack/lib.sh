# shellcheck shell=bash
# Shared helpers of the hack/ scripts. Source it; it defines functions only.

# log prints a progress line on stderr, prefixed with the script's name.
log() { printf '\033[1m[%s]\033[0m %s\n' "${LOG_PREFIX:-hack}" "$*" >&2; }

# die prints an error and exits.
die() { printf '[%s] error: %s\n' "${LOG_PREFIX:-hack}" "$*" >&2; exit 1; }

# free_port prints a TCP port that is free on 127.0.0.1 right now.
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# free_ports N prints N distinct free TCP ports on 127.0.0.1, one per line
# (all bound at once, so no two are the same).
free_ports() {
	python3 -c 'import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("127.0.0.1", 0))
print("\n".join(str(s.getsockname()[1]) for s in socks))' "$1"
}

# need_bin NAME... fails with a hint when bin/NAME is missing.
need_bin() {
	local b
	for b in "$@"; do
		[[ -x "$BIN/$b" ]] || die "$BIN/$b is missing: run 'make tools' first"
	done
}

# wait_until SECONDS WHAT COMMAND... retries COMMAND until it succeeds.
wait_until() {
	local timeout=$1 what=$2
	shift 2
	local deadline=$((SECONDS + timeout))
	until "$@" >/dev/null 2>&1; do
		((SECONDS < deadline)) || return 1
		sleep 0.2
	done
	log "$what ready after $((SECONDS - deadline + timeout)) s"
}

# stop_pid PID [GRACE]: SIGTERM, then SIGKILL after GRACE seconds (default 10).
# The kube-apiserver has been seen taking 70 s to stop on SIGTERM.
stop_pid() {
	local pid=$1 grace=${2:-10} i
	kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < grace * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

# serve_until_done ENV_FILE COMMAND...: with a COMMAND, run it and return its
# status; without one, wait until Ctrl-C or SIGTERM (the caller's trap cleans
# up). ENV_FILE holds the variables to export for COMMAND.
serve_until_done() {
	local env_file=$1
	shift
	if (($#)); then
		local rc=0
		# shellcheck source=/dev/null # the servers' env file, written at run time
		( set -a && source "$env_file" && set +a && PATH="$BIN:$PATH" && "$@" ) || rc=$?
		return "$rc"
	fi
	log "running; press Ctrl-C to stop and clean up"
	sleep infinity &
	wait $! || true
}
