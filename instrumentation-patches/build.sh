#!/usr/bin/env bash
# Obtain every pinned QUIC stack from its package registry, apply our instrumentation patch,
# build the lab programs, and describe them in build/stacks.json.
#
#   instrumentation-patches/build.sh            # build everything (cached: re-runs take seconds)
#   instrumentation-patches/build.sh quic-go    # only the stacks whose name matches
#
# Sources come only from the Go module proxy (`go mod download`), the Python package index
# (`pip download --no-binary :all:`) and Rust's package registry (`cargo fetch` of a throw-away
# project). A patch that no longer applies stops the build with the rejected hunks printed.
# Everything lands under build/ (ignored by git).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="$root/build"
only="${1:-}"
mkdir -p "$build"

log() { echo "build.sh: $*" >&2; }
die() { echo "build.sh: ERROR: $*" >&2; exit 1; }
hash_of() { cat "$@" | sha256sum | cut -c1-16; }
# built_from STAMP FILE...: the stamp and the files it hashes, as members of a stacks.json
# entry; the lab hashes the files again and refuses a stack whose sources changed since.
built_from() {
  local stamp="$1" sep="" f
  shift
  printf ', "stamp": "%s", "sources": [' "$stamp"
  for f in "$@"; do printf '%s"%s"' "$sep" "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")"; sep=", "; done
  printf ']'
}

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
  local version="$1" ccs="$2"
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
  entries+=("$(printf '{"stack": "quic-go", "version": "%s", "patch": "quic-go/%s.patch", "server": ["%s"], "client": ["%s"], "env": {}, "controllers": %s%s}' \
    "$version" "$version" "$bin" "$bin" "$ccs" "$(built_from "$stamp" "$patchfile" "$labsrc" "$0")")")
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
  entries+=("$(printf '{"stack": "aioquic", "version": "%s", "patch": "aioquic/%s.patch", "server": ["%s", "%s"], "client": ["%s", "%s"], "env": {}, "controllers": ["cubic", "reno"]%s}' \
    "$version" "$version" "$venv/bin/python" "$labsrc" "$venv/bin/python" "$labsrc" \
    "$(built_from "$stamp" "$patchfile" "$0")")")
}

# ------------------------------------------------------------------ Rust crates (cargo's registry)
# Compiled crates are shared by every Rust stack in one target directory. Builds run niced with
# CARGO_BUILD_JOBS (default 2) and a modest release profile (opt-level 2, no LTO).
cargo_target="$build/cargo/target"
lab_profile='[profile.release]
opt-level = 2
debug = false
incremental = false
codegen-units = 16
'

# crate_source NAME VERSION DEST: the pinned crate's source as cargo fetched it, copied to DEST.
crate_source() {
  local name="$1" version="$2" dest="$3" fetch="$3.fetch"
  rm -rf "$fetch" "$dest"
  mkdir -p "$fetch/src"
  echo 'fn main() {}' >"$fetch/src/main.rs"
  printf '[package]\nname = "fetch"\nversion = "0.0.0"\nedition = "2021"\npublish = false\n\n[dependencies]\n%s = "=%s"\n' \
    "$name" "$version" >"$fetch/Cargo.toml"
  (cd "$fetch" && cargo fetch -q) || die "cargo fetch $name $version failed"
  local manifest
  manifest="$(cd "$fetch" && cargo metadata -q --format-version 1 |
    python3 -c 'import json,sys; n,v=sys.argv[1:]; print(next(p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"]==n and p["version"]==v))' "$name" "$version")" ||
    die "cargo metadata: no $name $version"
  cp -r "$(dirname "$manifest")" "$dest"
  chmod -R u+w "$dest"
  rm -rf "$fetch"
}

# build_rust STACK VERSION CRATE CRATE_VERSION PATCH LAB_DEPS CONTROLLERS
#   CRATE (at CRATE_VERSION) is patched; the lab program depends on it through
#   cargo's [patch] table, so STACK (at VERSION, possibly another crate) uses the patched copy.
build_rust() {
  local stack="$1" version="$2" crate="$3" crate_version="$4" patchfile="$here/$5" deps="$6" ccs="$7"
  local labsrc="$here/$stack/lab/main.rs" dir="$build/$stack/$version" bin="$build/$stack/$version/quicsm-$stack"
  [[ -f "$patchfile" ]] || die "missing $patchfile"
  command -v cargo >/dev/null || die "the Rust toolchain (cargo) is needed to build $stack"
  local stamp
  stamp="$(hash_of "$patchfile" "$labsrc" "$0")"
  if [[ -x "$bin" && "$(cat "$dir/.stamp" 2>/dev/null)" == "$stamp" ]]; then
    log "$stack $version: up to date"
  else
    log "$stack $version: fetching $crate $crate_version, patching, building (takes minutes)"
    rm -rf "$dir"
    mkdir -p "$dir/lab"
    crate_source "$crate" "$crate_version" "$dir/src"
    apply_patch "$dir/src" "$patchfile"
    cp "$labsrc" "$dir/lab/main.rs"
    printf '[package]\nname = "quicsm-%s"\nversion = "0.0.0"\nedition = "2021"\npublish = false\n\n[[bin]]\nname = "quicsm-%s"\npath = "main.rs"\n\n[dependencies]\n%s\n[patch.crates-io]\n%s = { path = "../src" }\n\n%s' \
      "$stack" "$stack" "$deps" "$crate" "$lab_profile" >"$dir/lab/Cargo.toml"
    (cd "$dir/lab" && CARGO_TARGET_DIR="$cargo_target" CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}" \
      nice -n 10 cargo build -q --release >"$dir/cargo.log" 2>&1) ||
      { tail -30 "$dir/cargo.log" >&2; die "$stack $version: build failed (log: $dir/cargo.log)"; }
    cp "$cargo_target/release/quicsm-$stack" "$bin"
    echo "$stamp" >"$dir/.stamp"
  fi
  entries+=("$(printf '{"stack": "%s", "version": "%s", "patch": "%s", "server": ["%s"], "client": ["%s"], "env": {}, "controllers": %s%s}' \
    "$stack" "$version" "$5" "$bin" "$bin" "$ccs" "$(built_from "$stamp" "$patchfile" "$labsrc" "$0")")")
}

# ------------------------------------------------------------------ stock quic-go (no patch)
# Opt-in: QUICSM_STOCK_QUICGO=v0.54.0 instrumentation-patches/build.sh
# (or several releases: QUICSM_STOCK_QUICGO="v0.59.1 v0.63.0")
# Unpatched upstream releases, built with the same lab program, listed on their own in
# build/stacks-stock.json (for `quicsm lab run --stacks build/stacks-stock.json`): their traces
# carry quic-go's own four congestion states only, for validating derived states on releases
# that were not used to tune them (docs/derive.md). They are never part of build/stacks.json.
stock_entries=()
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
  stock_entries+=("$(printf '{"stack": "quic-go-stock", "version": "%s", "patch": "", "server": ["%s"], "client": ["%s"], "env": {}%s}' \
    "$version" "$bin" "$bin" "$(built_from "$stamp" "$labsrc" "$0")")")
}

want() { [[ -z "$only" || "$1" == *"$only"* ]]; }
want quic-go && build_quicgo v0.48.2 '["newreno"]'
want quic-go && build_quicgo v0.65.0 '["newreno", "cubic"]'
want aioquic && build_aioquic 1.7.2
want quiche && build_rust quiche 0.30.0 quiche 0.30.0 quiche/0.30.0.patch \
  'quiche = { version = "=0.30.0", features = ["qlog"] }
rcgen = { version = "0.13", default-features = false, features = ["ring", "pem", "crypto"] }
signal-hook = "0.3"
' '["cubic", "reno", "bbr2"]'
want quinn && build_rust quinn 0.11.12 quinn-proto 0.11.19 quinn/quinn-proto-0.11.19.patch \
  'quinn = { version = "=0.11.12", default-features = false, features = ["runtime-tokio", "rustls-ring", "qlog", "log"] }
quinn-proto = { version = "=0.11.19", default-features = false, features = ["rustls-ring", "qlog", "log"] }
tokio = { version = "1", features = ["rt", "net", "time", "signal", "macros", "sync"] }
rustls = { version = "0.23", default-features = false, features = ["ring", "std"] }
rcgen = { version = "0.13", default-features = false, features = ["ring", "pem", "crypto"] }
' '["newreno", "cubic", "bbr"]'

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

if [[ -n "${QUICSM_STOCK_QUICGO:-}" ]]; then
  for version in $QUICSM_STOCK_QUICGO; do build_quicgo_stock "$version"; done
  {
    echo "["
    for i in "${!stock_entries[@]}"; do
      sep=","; [[ $i -eq $((${#stock_entries[@]} - 1)) ]] && sep=""
      echo "  ${stock_entries[$i]}$sep"
    done
    echo "]"
  } >"$build/stacks-stock.json"
  log "wrote build/stacks-stock.json (${#stock_entries[@]} stock releases)"
fi
