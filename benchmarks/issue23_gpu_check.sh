#!/usr/bin/env bash
# Issue 23's last GPU checks in one call on a 4-GPU host (run from the project root, wheels
# installed as benchmarks/README.md says), results under $1:
#   GPUs 0,1: the same cell benched twice, two cells (do the intervals overlap?), then a short
#             `recipe tune` of ref-100m (does its report name ties?);
#   GPUs 2,3: LeRobot points the FSDP1 estimate change and the FSDP2 rule were not fitted on:
#             act and diffusion under ddp, fsdp and fsdp2 (cpu_ram_efficient_loading=false) at
#             micro batches 6 and 12, three instances sharing the pair (memory only).
set -uo pipefail
out="${1:?output folder}"; mkdir -p "$out"
toy=/tmp/ds/toy
[ -d "$toy" ] || python3 benchmarks/make_dataset.py "$toy" > "$out/dataset.log" 2>&1
M="python3 benchmarks/lerobot_memory.py measure --env $(command -v python3) --dataset-root $toy --micro 6,12 --deadline-s 420 --gpus 2,3"
$M --policies act --backends ddp,fsdp --port 29640 --out "$out/lerobot-act.jsonl" > "$out/lerobot-act.log" 2>&1 &
$M --policies diffusion --backends ddp,fsdp --port 29650 --out "$out/lerobot-diffusion.jsonl" > "$out/lerobot-diffusion.log" 2>&1 &
$M --policies act,diffusion --backends fsdp2 --set backend.cpu_ram_efficient_loading=false --port 29660 \
  --out "$out/lerobot-fsdp2.jsonl" > "$out/lerobot-fsdp2.log" 2>&1 &
for cell in ref-1b/fsdp2/2xH100 ref-100m/ddp/2xH100; do
  for k in 1 2; do
    CUDA_VISIBLE_DEVICES=0,1 python3 -m registry bench "$cell" --steps 20 --format json --allow-hardware-mismatch \
      launch.main_process_port=29610 2>>"$out/bench.log" | python3 -c "import json,sys; d=json.load(sys.stdin); print(json.dumps(d))" >> "$out/bench.jsonl"
  done
done
CUDA_VISIBLE_DEVICES=0,1 timeout -s INT 300 python3 -m registry tune ref-100m/2xH100 --global-batch 64 --budget 4 \
  --output-dir /tmp/tune-100m --allow-hardware-mismatch launch.main_process_port=29620 > "$out/tune.log" 2>&1
cp /tmp/tune-100m/results.json "$out/tune-results.json" 2>/dev/null
wait
tar czf "$out/logs.tgz" "$out"/*.log 2>/dev/null && rm -f "$out"/*.log
ls -la "$out"
