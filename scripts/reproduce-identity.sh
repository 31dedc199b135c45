#!/usr/bin/env bash
# Byte-identical paper reproductions before and after a change to the Python front end.
#
# Why: a refactor of the reproductions, the plots or the output helpers must not change a single
# number, table or line of what `pmsim reproduce` writes. `snapshot` runs every paper that
# `pmsim reproduce --help` lists at --scale quick into a folder (plus each run's printed summary,
# with the folder's path replaced by OUT); `compare` diffs two snapshots: every file but the PNGs
# must be byte-identical (exit 1 otherwise); PNGs that differ in bytes are listed to be looked at
# (matplotlib output is deterministic on one machine, so a listed PNG usually means a drawing
# change). Simulated results themselves are checked by scripts/stats-identity.py.
#
#   scripts/reproduce-identity.sh snapshot DIR [--pmsim PATH] [--jobs N] [--no-cache]
#   scripts/reproduce-identity.sh compare BASE NEW
#
# Typical use: snapshot with the base revision's pmsim, change the code, `pip install -e .`,
# snapshot again into another folder, compare. Runs use the run cache ($PMSIM_CACHE or
# ~/.cache/pmsim): its key includes a hash of the compiled core, so a rebuilt simulator never
# reuses an old result, and a Python-only change costs only the tabulation. --no-cache reruns all.
set -euo pipefail

usage() {
	sed -n 's/^#   //p' "$0" >&2
	exit 2
}

snapshot() {
	local dir="" pmsim=pmsim jobs=1 cache=()
	while [ $# -gt 0 ]; do
		case "$1" in
		--pmsim) pmsim="$2"; shift 2 ;;
		--jobs) jobs="$2"; shift 2 ;;
		--no-cache) cache=(--no-cache); shift ;;
		-*) usage ;;
		*) [ -z "$dir" ] || usage; dir="$1"; shift ;;
		esac
	done
	[ -n "$dir" ] || usage
	dir="${dir%/}"
	if [ -e "$dir" ] && [ -n "$(ls -A "$dir")" ]; then
		echo "reproduce-identity: $dir exists and is not empty; give a new folder" >&2
		exit 2
	fi
	mkdir -p "$dir"
	# The papers are the choices of `pmsim reproduce`'s positional argument: {asap,persistency,...}
	local papers
	papers=$("$pmsim" reproduce --help | sed -n 's/^ *{\([a-z0-9,_-]*\)}.*/\1/p' | head -n 1 | tr , ' ')
	[ -n "$papers" ] || { echo "reproduce-identity: no papers in '$pmsim reproduce --help'" >&2; exit 2; }
	for p in $papers; do
		echo "reproduce-identity: $p" >&2
		"$pmsim" reproduce "$p" --scale quick --jobs "$jobs" --quiet "${cache[@]}" --out "$dir" \
			| sed "s|$dir|OUT|g" >"$dir/$p.stdout"
	done
	echo "reproduce-identity: snapshot of $papers in $dir" >&2
}

compare() {
	[ $# -eq 2 ] || usage
	local base="$1" new="$2" status=0
	if diff -r -x '*.png' "$base" "$new"; then
		echo "reproduce-identity: every file but the PNGs is byte-identical" \
			"($(find "$base" -type f ! -name '*.png' | wc -l) files)"
	else
		echo "reproduce-identity: FAILED: the files above differ" >&2
		status=1
	fi
	if ! diff <(cd "$base" && find . -name '*.png' | sort) <(cd "$new" && find . -name '*.png' | sort); then
		echo "reproduce-identity: FAILED: not the same PNG files (above)" >&2
		status=1
	fi
	local png same=0 differ=()
	while IFS= read -r png; do
		if [ ! -e "$new/$png" ]; then
			continue
		elif cmp -s "$base/$png" "$new/$png"; then
			same=$((same + 1))
		else
			differ+=("$png")
		fi
	done < <(cd "$base" && find . -name '*.png' | sort)
	echo "reproduce-identity: PNGs: $same byte-identical, ${#differ[@]} differ${differ:+ (look at them):}"
	for png in "${differ[@]}"; do
		echo "  $base/$png  $new/$png"
	done
	return $status
}

case "${1:-}" in
snapshot) shift; snapshot "$@" ;;
compare) shift; compare "$@" ;;
*) usage ;;
esac
