#!/usr/bin/env bash
# From clone to first model: the wall time of the README's first command on a fresh clone of
# this repository (empty pip cache, fresh Rust build of the native core; Debian packages that
# are already installed are not reinstalled).
#
#   benchmarks/first_model.sh            # prints "<seconds> s wall, <seconds> s user"
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
git clone -q "$here" "$work/quicsm"
cd "$work/quicsm"
[[ -d "$HOME/.cargo/bin" ]] && PATH="$HOME/.cargo/bin:$PATH"
start=$(date +%s.%N)
PIP_NO_CACHE_DIR=1 scripts/setup >"$work/setup.log" 2>&1
.venv/bin/quicsm infer traces/*.qlog -o out -q
end=$(date +%s.%N)
test -s out/model.svg
echo "$(python3 -c "print(round($end - $start, 1))") s wall (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
