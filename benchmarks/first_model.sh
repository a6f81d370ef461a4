#!/usr/bin/env bash
# What a newcomer meets, timed on a fresh clone of this repository: the README's first command
# (set-up, then a model) and, with --suite, then `scripts/test --fast` in the same clone. Each
# step is reported with its wall and CPU seconds (user + system, children included), the load
# average before and after, and the state of the caches it started from:
#
#   - pip: cold (PIP_NO_CACHE_DIR=1: every wheel downloaded or built again);
#   - the native core: cold (a fresh cargo target directory under the clone's build/), while
#     cargo's registry of downloaded crates (~/.cargo/registry) is whatever this machine has;
#   - Debian packages: the ones already installed are not reinstalled (`apt` is not timed
#     when nothing is missing);
#   - `scripts/test --fast` after the first model: the clone's .venv exists (warm for the
#     analyser), the test extras and the fuzz target are installed and built (cold);
#   - with --again, `scripts/test --fast` once more in the same clone: everything warm (the
#     edit-test loop as a contributor meets it).
#
#   benchmarks/first_model.sh                    # the first model only
#   benchmarks/first_model.sh --suite            # then scripts/test --fast
#   benchmarks/first_model.sh --suite --again    # then scripts/test --fast a second time
#   benchmarks/first_model.sh --output FILE      # the JSON record (default: build/benchmarks/
#                                                # first_model.json in this checkout), each
#                                                # step's log beside it (FILE without .json,
#                                                # then -STEP.log)
#   benchmarks/first_model.sh --help
#
# The machine is what it is: the load average recorded next to each time says how busy it was.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
suite=0 again=0
output="$here/build/benchmarks/first_model.json"
while (($#)); do
  case "$1" in
    --suite) suite=1 ;;
    --again) again=1 ;;
    --output) output="$2"; shift ;;
    -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "first_model.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$(dirname "$output")"
output="$(cd "$(dirname "$output")" && pwd)/$(basename "$output")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
git clone -q "$here" "$work/quicsm"
cd "$work/quicsm"
commit=$(git rev-parse --short HEAD)
[[ -d "$HOME/.cargo/bin" ]] && PATH="$HOME/.cargo/bin:$PATH"
load() { cut -d' ' -f1-3 /proc/loadavg; }
cpu() { awk '{ print $14 + $15 + $16 + $17 }' /proc/$$/stat; }  # ticks: self and children
hz=$(getconf CLK_TCK)
records=()
# step NAME COMMAND...: runs COMMAND, its output to the work directory's log; one JSON record
step() {
  local name="$1"; shift
  local load0 t0 c0 t1 c1 code=0
  load0=$(load); t0=$(date +%s.%N); c0=$(cpu)
  "$@" >"$work/$name.log" 2>&1 || code=$?
  t1=$(date +%s.%N); c1=$(cpu)
  cp "$work/$name.log" "${output%.json}-$name.log"  # the clone goes, its logs stay
  local wall cpu_s
  wall=$(python3 -c "print(round($t1 - $t0, 1))")
  cpu_s=$(python3 -c "print(round(($c1 - $c0) / $hz, 1))")
  echo "$name: $wall s wall, $cpu_s s CPU (load average $load0 before, $(load) after)" \
    "$( ((code)) && echo "FAILED with exit code $code; its log ends:" )"
  ((code)) && tail -n 30 "$work/$name.log"
  records+=("{\"step\": \"$name\", \"wall_s\": $wall, \"cpu_s\": $cpu_s, \"exit_code\": $code, \"load_before\": \"$load0\", \"load_after\": \"$(load)\"}")
  return $code
}
first_model() {
  PIP_NO_CACHE_DIR=1 scripts/setup
  .venv/bin/quicsm infer traces/*.qlog -o out -q
  test -s out/model.svg
}
status=0
step first_model first_model || status=$?
if ((suite && !status)); then
  step test_fast env PIP_NO_CACHE_DIR=1 scripts/test --fast || status=$?
fi
if ((suite && again && !status)); then
  step test_fast_warm scripts/test --fast || status=$?
fi
{
  echo "{\"commit\": \"$commit\", \"cpus\": $(nproc), \"caches\": \"pip cold; native core cold;" \
    "cargo registry as on this machine; Debian packages already installed; test_fast_warm: all" \
    "warm\", \"steps\": ["
  (IFS=,; echo "${records[*]}")
  echo "]}"
} >"$output"
echo "written: $output"
exit $status
