#!/usr/bin/env bash
# check-clean.sh fails when the tests left something behind: a process started
# from bin/ (etcd, kube-apiserver, minio, ...) or a file outside the
# git-ignored folders that was not there before the tests.
#
# Usage: hack/check-clean.sh snapshot   (before the tests)
#        hack/check-clean.sh verify     (after them)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
LOG_PREFIX=check-clean
# shellcheck source=hack/lib.sh
source "$ROOT/hack/lib.sh"
snapshot=$ROOT/bin/.untracked-before-tests

untracked() { git -C "$ROOT" status --porcelain --untracked-files=all | sort; }

case ${1:-} in
snapshot)
	mkdir -p "$ROOT/bin"
	untracked >"$snapshot"
	;;
verify)
	# Processes started from this clone's bin/ or the tool cache.
	cache=${SHARDFEED_CACHE:-$HOME/.cache/shardfeed}
	left=$(pgrep -af -- "^($ROOT/bin/|$cache/)" | grep -v -- "$0" || true)
	[[ -z $left ]] || die "the tests left processes running:"$'\n'"$left"
	if [[ -f $snapshot ]]; then
		new=$(comm -13 "$snapshot" <(untracked) || true)
		[[ -z $new ]] || die "the tests changed files outside git-ignored folders:"$'\n'"$new"
	fi
	log "no process left running, no stray file"
	;;
*) die "usage: $0 snapshot|verify" ;;
esac
