#!/usr/bin/env bash
# pi07 at full size on this host's GPUs through `recipe run --rehearse` (issue 42): each argument
# BACKEND:MICRO:STEPS is one rehearsal of pi07/BACKEND/8xA100 on HARDWARE (default 1xH200).
#
#   bash benchmarks/pi07_rehearsal_gpu.sh zero2:4:20 fsdp:4:20 zero2:2:4 ...
#
# For the offline GPU host (../shared/gpu/README.md): installs the carried wheels in .whl/ (OpenTau
# 0.14.0 and what its training needs, benchmarks/README.md lists them) into /tmp/site, then runs the
# project from source. Each rehearsal's report, and the end of its trainer's log, go to $OUT
# (default benchmarks/results/gpu) as pi07_BACKEND_mbMICRO.json and .log. One failed rehearsal does
# not stop the next; the exit code is the last failure's. EXTRA: overrides given to every rehearsal
# (e.g. EXTRA=policy.attention_implementation=eager), TAG: a suffix for the files' names.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-benchmarks/results/gpu}
hardware=${HARDWARE:-1xH200}
mkdir -p "$out"
if [ -d .whl ] && [ ! -d /tmp/site/opentau ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --ignore-requires-python \
    --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH HF_HUB_OFFLINE=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$out/host.txt" 2>&1
python3 -c 'import torch, transformers, opentau, deepspeed; print("torch", torch.__version__, "transformers", transformers.__version__, "deepspeed", deepspeed.__version__)' >> "$out/host.txt" 2>&1
status=0
for cell in "$@"; do
  IFS=: read -r backend micro steps <<< "$cell"
  name="pi07_${backend}_mb${micro}${TAG:-}"
  folder="/tmp/rehearsals/$name"
  rm -rf "$folder"
  start=$SECONDS
  python3 -m registry run "pi07/$backend/8xA100" "hardware=$hardware" "train.micro_batch_size=$micro" ${EXTRA:-} \
    --rehearse --steps "$steps" --output-dir "$folder" > "$out/$name.out" 2>&1
  code=$?
  echo "$name: exit $code in $((SECONDS - start)) s" | tee -a "$out/host.txt"
  [ "$code" = 0 ] || status=$code
  cp "$folder/rehearsal.json" "$out/$name.json" 2>/dev/null
  grep -v "Discrete action token\|Map:\|parquet" "$folder/run/launch.log" 2>/dev/null | tail -40 > "$out/$name.log"
done
exit $status
