#!/usr/bin/env bash
# Obtain every pinned QUIC stack from its package registry, apply our instrumentation patch,
# build the lab programs, and describe them in build/stacks.json.
#
#   instrumentation-patches/build.sh            # build everything (cached: re-runs take seconds)
#   instrumentation-patches/build.sh quic-go    # only the stacks whose name matches
#
# Sources come only from the Go module proxy (`go mod download`) and the Python package index
# (`pip download --no-binary :all:`). A patch that no longer applies stops the build with the
# rejected hunks printed. Everything lands under build/ (ignored by git).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="$root/build"
only="${1:-}"
mkdir -p "$build"

log() { echo "build.sh: $*" >&2; }
die() { echo "build.sh: ERROR: $*" >&2; exit 1; }
hash_of() { cat "$@" | sha256sum | cut -c1-16; }

# apply_patch SRC_DIR PATCH: a patch that does not apply exactly is a hard error.
apply_patch() {
  local src="$1" patchfile="$2" out
  if ! out="$(patch -d "$src" -p1 --forward --batch --no-backup-if-mismatch -r - <"$patchfile" 2>&1)"; then
    echo "$out" >&2
    die "patch $(basename "$(dirname "$patchfile")")/$(basename "$patchfile") no longer applies to $src"
  fi
  if grep -qi "fuzz\|offset" <<<"$out"; then
    log "note: $(basename "$patchfile") applied with offsets/fuzz:"; echo "$out" >&2
  fi
}

command -v patch >/dev/null || die "the 'patch' program is needed (Debian package: patch)"
entries=()

# ------------------------------------------------------------------ quic-go (Go module proxy)
build_quicgo() {
  local version="$1"
  local patchfile="$here/quic-go/$version.patch" labsrc="$here/quic-go/lab/main.go"
  local dir="$build/quic-go/$version" bin="$build/quic-go/$version/quicsm-quicgo"
  [[ -f "$patchfile" ]] || die "missing $patchfile"
  command -v go >/dev/null || die "the Go toolchain (go >= 1.21) is needed to build quic-go"
  export GOMODCACHE="$build/go/mod" GOCACHE="$build/go/cache" GOPATH="$build/go/path"
  export GOFLAGS="-modcacherw -buildvcs=false" GOTOOLCHAIN="${GOTOOLCHAIN:-auto}" GOTELEMETRY=off
  local stamp
  stamp="$(hash_of "$patchfile" "$labsrc" "$0")"
  if [[ -x "$bin" && "$(cat "$dir/.stamp" 2>/dev/null)" == "$stamp" ]]; then
    log "quic-go $version: up to date"
  else
    log "quic-go $version: fetching module, patching, building"
    local moddir
    moddir="$(cd "$build" && go mod download -json "github.com/quic-go/quic-go@$version" |
      sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')"
    [[ -n "$moddir" && -d "$moddir" ]] || die "go mod download github.com/quic-go/quic-go@$version failed"
    rm -rf "$dir"
    mkdir -p "$dir/lab"
    cp -r "$moddir" "$dir/src"
    chmod -R u+w "$dir/src"
    apply_patch "$dir/src" "$patchfile"
    cp "$labsrc" "$dir/lab/main.go"
    cat >"$dir/lab/go.mod" <<EOF
module quicsm.lab/quicgo

go 1.22

require github.com/quic-go/quic-go $version

replace github.com/quic-go/quic-go => ../src
EOF
    (cd "$dir/lab" && go mod tidy 2>"$dir/tidy.log" && go build -trimpath -o "$bin" .) ||
      die "quic-go $version: build failed"
    echo "$stamp" >"$dir/.stamp"
  fi
  entries+=("$(printf '{"stack": "quic-go", "version": "%s", "patch": "quic-go/%s.patch", "server": ["%s"], "client": ["%s"], "env": {}}' \
    "$version" "$version" "$bin" "$bin")")
}

# ------------------------------------------------------------------ aioquic (Python package index)
build_aioquic() {
  local version="$1"
  local patchfile="$here/aioquic/$version.patch" labsrc="$here/aioquic/lab.py"
  local dir="$build/aioquic/$version" venv="$build/aioquic/$version/venv"
  [[ -f "$patchfile" ]] || die "missing $patchfile"
  local py="${PYTHON:-python3}"
  local stamp
  stamp="$(hash_of "$patchfile" "$0")"
  if [[ -x "$venv/bin/python" && "$(cat "$dir/.stamp" 2>/dev/null)" == "$stamp" ]]; then
    log "aioquic $version: up to date"
  else
    log "aioquic $version: fetching sdist, patching, installing into its own venv"
    rm -rf "$dir"
    mkdir -p "$dir/dl"
    "$py" -m pip download -q --no-deps --no-binary :all: -d "$dir/dl" "aioquic==$version" ||
      die "pip download aioquic==$version failed"
    local sdist
    sdist="$(ls "$dir"/dl/aioquic-"$version".tar.gz 2>/dev/null | head -1)"
    [[ -n "$sdist" ]] || die "no sdist for aioquic==$version"
    tar -xzf "$sdist" -C "$dir"
    mv "$dir/aioquic-$version" "$dir/src"
    apply_patch "$dir/src" "$patchfile"
    "$py" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q "$dir/src" || die "aioquic $version: install failed"
    echo "$stamp" >"$dir/.stamp"
  fi
  entries+=("$(printf '{"stack": "aioquic", "version": "%s", "patch": "aioquic/%s.patch", "server": ["%s", "%s"], "client": ["%s", "%s"], "env": {}}' \
    "$version" "$version" "$venv/bin/python" "$labsrc" "$venv/bin/python" "$labsrc")")
}

# ------------------------------------------------------------------ stock quic-go (no patch)
# Opt-in: QUICSM_STOCK_QUICGO=v0.54.0 instrumentation-patches/build.sh
# An unpatched upstream release, built with the same lab program, listed on its own in
# build/stacks-stock.json (for `quicsm lab run --stacks build/stacks-stock.json`): its traces
# carry quic-go's own four congestion states only, for validating derived states on a release
# that was not used to tune them (docs/derive.md). It is never part of build/stacks.json.
build_quicgo_stock() {
  local version="$1"
  local labsrc="$here/quic-go/lab/main.go"
  local dir="$build/quic-go-stock/$version" bin="$build/quic-go-stock/$version/quicsm-quicgo"
  command -v go >/dev/null || die "the Go toolchain (go >= 1.21) is needed to build quic-go"
  export GOMODCACHE="$build/go/mod" GOCACHE="$build/go/cache" GOPATH="$build/go/path"
  export GOFLAGS="-modcacherw -buildvcs=false" GOTOOLCHAIN="${GOTOOLCHAIN:-auto}" GOTELEMETRY=off
  local stamp
  stamp="$(hash_of "$labsrc" "$0")"
  if [[ -x "$bin" && "$(cat "$dir/.stamp" 2>/dev/null)" == "$stamp" ]]; then
    log "quic-go $version (stock): up to date"
  else
    log "quic-go $version (stock): building the lab program against the unpatched module"
    rm -rf "$dir"
    mkdir -p "$dir/lab"
    cp "$labsrc" "$dir/lab/main.go"
    printf 'module quicsm.lab/quicgo\n\ngo 1.22\n\nrequire github.com/quic-go/quic-go %s\n' \
      "$version" >"$dir/lab/go.mod"
    (cd "$dir/lab" && go mod tidy 2>"$dir/tidy.log" && go build -trimpath -o "$bin" .) ||
      die "quic-go $version (stock): build failed"
    echo "$stamp" >"$dir/.stamp"
  fi
  printf '[\n  {"stack": "quic-go-stock", "version": "%s", "patch": "", "server": ["%s"], "client": ["%s"], "env": {}}\n]\n' \
    "$version" "$bin" "$bin" >"$build/stacks-stock.json"
  log "wrote build/stacks-stock.json"
}

want() { [[ -z "$only" || "$1" == *"$only"* ]]; }
want quic-go && build_quicgo v0.48.2
want quic-go && build_quicgo v0.65.0
want aioquic && build_aioquic 1.7.2

{
  echo "["
  for i in "${!entries[@]}"; do
    sep=","; [[ $i -eq $((${#entries[@]} - 1)) ]] && sep=""
    echo "  ${entries[$i]}$sep"
  done
  echo "]"
} >"$build/stacks.json.tmp"
mv "$build/stacks.json.tmp" "$build/stacks.json"
log "wrote build/stacks.json (${#entries[@]} stacks)"

[[ -z "${QUICSM_STOCK_QUICGO:-}" ]] || build_quicgo_stock "$QUICSM_STOCK_QUICGO"
