#!/usr/bin/env bash
# Issue 15's GPU acceptance for one policy, in calls of at most SECONDS each, on 4 GPUs (the
# exhaustive grid as two instances: GPUs 0,1 run shards 0-2 of 5, GPUs 2,3 shards 3-4, and
# `recipe tune` on GPUs 2,3 first when asked) or on 2 (the tune first, then every shard on 0,1).
# Tune and grid run POLICY/2xGPU, GPU the catalog entry of this host's cards (nvidia-smi's name
# mapped through catalog/gpus.yaml: 2xH200 on an H200 host, 2xH100 on an H100 SXM one), a
# generated hardware name unless a part of that name exists.
# Run the same command again (without `tune`) until every shard is done: finished configurations
# are skipped. Parts go to runs/acceptance/POLICY/. Each call works in the foreground and leaves
# everything in that folder: a job left running between calls is lost with the host.
#
#   bash benchmarks/tune_acceptance.sh ref-1b 500 tune   # first call: tune, then grid shards
#   bash benchmarks/tune_acceptance.sh ref-1b 540        # later calls: the rest of the grid
#   python3 benchmarks/grid.py merge runs/acceptance/ref-1b/grid-*.jsonl --output benchmarks/results/grid_2xGPU_ref-1b.json
#   python3 benchmarks/grid.py accept benchmarks/results/grid_2xGPU_ref-1b.json runs/acceptance/ref-1b/tune/results.json \
#       --policy ref-1b --tune-wall "$(cat runs/acceptance/ref-1b/tune.wall)"
#
# SECONDS: start no configuration after this long (the longest takes about 100 s), and give the
# tune at most this long (a tune cut off is discarded and runs again whole at the next `tune` call). Sizing (2 x
# H100, benchmarks/README.md): ref-100m's grid is 1,558 s of one pair and its tune 258 s; ref-1b's
# launches alone are at least 25 s (78 s under zero3-offload) each, so its grid is over 25 minutes
# of one pair before the longer steps of small micro batches, and its tune 6.5-10 minutes.
set -euo pipefail
policy="${1:?policy}"; limit="${2:?seconds}"; with_tune="${3:-}"
case "$policy" in ""|*[!A-Za-z0-9._-]*) echo "tune_acceptance.sh: bad policy name" >&2; exit 2;; esac
case "$limit" in ""|*[!0-9]*) echo "tune_acceptance.sh: SECONDS must be a number" >&2; exit 2;; esac
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
case "$gpus" in
  2|4) ;;
  *) echo "tune_acceptance.sh: needs 2 or 4 GPUs, found ${gpus:-0}" >&2; exit 2;;
esac
cd "$(dirname "$0")/.."
# this host's cards as the catalog names them; exits 2 (and says why) where the catalog lacks them
host=$(python3 -c 'import sys; from registry.run.machine import print_hardware_name as p; sys.exit(p())') || exit 2
hardware="2x${host#*x}"
parts="runs/acceptance/$policy"
mkdir -p "$parts"
start=$(date +%s)
grid() {
  local gpus=$1 port=$2; shift 2
  for k in "$@"; do
    left=$((limit - $(date +%s) + start))
    [ "$left" -gt 0 ] || return 0
    python3 benchmarks/grid.py measure --policies "$policy" --gpus "$gpus" --port "$port" --shard "$k/5" \
      --hardware "$hardware" --out "$parts/grid-$k.jsonl" --deadline "$left" >> "$parts/grid-${gpus/,/}.log" 2>&1 || true
  done
}
tune() {  # whole within this call, or not at all: its wall time is the figure judged
  if [ "$with_tune" = tune ] && [ ! -e "$parts/tune.wall" ]; then
    rm -rf "$parts/tune"
    if ! CUDA_VISIBLE_DEVICES=$1 /usr/bin/time -f %e -o "$parts/tune.wall.part" timeout -s INT "$limit" \
      python3 -m registry tune "$policy/$hardware" --global-batch 64 --output-dir "$parts/tune" \
      launch.main_process_port=29641 > "$parts/tune.log" 2>&1; then
      echo "tune_acceptance.sh: the tune did not finish within $limit s (see $parts/tune.log): give SECONDS more" >&2
      return 0
    fi
    mv "$parts/tune.wall.part" "$parts/tune.wall"
  fi
}
if [ "$gpus" -eq 4 ]; then
  grid 0,1 29610 0 1 2 &
  (tune 2,3; grid 2,3 29620 3 4) &
  wait
else
  tune 0,1
  grid 0,1 29610 0 1 2 3 4
fi
echo "tune_acceptance.sh: $hardware: $(( $(date +%s) - start )) s; configurations done: $(cat "$parts"/grid-*.jsonl 2>/dev/null | wc -l) of 48"
