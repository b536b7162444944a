#!/usr/bin/env bash
# Memory under gradient accumulation (issue 23), on a host with 4 GPUs, in one call of at most
# SECONDS: six instances of benchmarks/grid.py measure, three on each pair of GPUs. Only peak
# allocated memory is read from these runs (per process, so runs sharing a GPU do not disturb it);
# their throughput is not a measurement.
#   calibration: ref-1b, every backend, micro batch 8 x accumulation 4 (global batch 64)
#   held out:    ref-1b and ref-100m, every backend, micro batches 3, 6, 12 at global batch 48
#                (accumulation 8, 4, 2)
# With `four`, instead: ref-1b on all 4 GPUs (hardware 4xH100) under the backends whose
# accumulated gradients depend on the rank count if they were sharded (DDP, ZeRO-1/2, FSDP1/2),
# micro batch 6 x accumulation 4 (global batch 96): FSDP's unsharded 2T against a sharded 4T/4.
# Parts go to runs/accumulation/; a configuration already there is skipped, so the same command
# resumes. Then, anywhere:
#   python3 benchmarks/grid.py merge runs/accumulation/cal-*.jsonl --name accumulation-calibration ...
#   python3 benchmarks/grid.py merge runs/accumulation/held-*.jsonl --name accumulation ...
set -euo pipefail
limit="${1:?seconds}"; mode="${2:-pairs}"
case "$limit" in ""|*[!0-9]*) echo "accumulation_memory.sh: SECONDS must be a number" >&2; exit 2;; esac
case "$mode" in pairs|four) ;; *) echo "accumulation_memory.sh: mode is pairs or four" >&2; exit 2;; esac
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
[ "$gpus" -ge 4 ] || { echo "accumulation_memory.sh: needs 4 GPUs, found ${gpus:-0}" >&2; exit 2; }
cd "$(dirname "$0")/.."
parts=runs/accumulation
mkdir -p "$parts"
start=$(date +%s)
measure() {  # GPUS PORT OUT ARGS...: one grid instance, bounded by what is left of the call
  local gpus=$1 port=$2 out=$3 left; shift 3
  left=$((limit - $(date +%s) + start))
  [ "$left" -gt 0 ] || return 0
  python3 benchmarks/grid.py measure --gpus "$gpus" --port "$port" --out "$parts/$out" \
    --deadline "$left" "$@" >> "$parts/${out%.jsonl}.log" 2>&1 || true
}
if [ "$mode" = four ]; then
  measure 0,1,2,3 29630 four.jsonl --policies ref-1b --hardware 4xH100 --global-batch 96 --micro 6 \
    --backends ddp,zero1,zero2,fsdp,fsdp-grad-op,fsdp2
  wc -l "$parts"/four.jsonl
  exit 0
fi
cal="--policies ref-1b --global-batch 64 --micro 8"
held="--global-batch 48 --micro 3,6,12"
(measure 0,1 29610 cal-0.jsonl $cal --shard 0/2; measure 0,1 29610 held-1b-0.jsonl $held --policies ref-1b --shard 0/4) &
(measure 2,3 29620 cal-1.jsonl $cal --shard 1/2; measure 2,3 29620 held-1b-1.jsonl $held --policies ref-1b --shard 1/4) &
measure 2,3 29621 held-1b-2.jsonl $held --policies ref-1b --shard 2/4 &
measure 0,1 29611 held-1b-3.jsonl $held --policies ref-1b --shard 3/4 &
measure 0,1 29612 held-100m-0.jsonl $held --policies ref-100m --shard 0/2 &
measure 2,3 29622 held-100m-1.jsonl $held --policies ref-100m --shard 1/2 &
wait
wc -l "$parts"/*.jsonl
