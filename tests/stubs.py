"""A stand-in for the launchers a per-node launch starts (accelerate, torchrun, opentau-train), shared
by the cluster engines' tests: it records the rank and rendezvous it was given and which of a
scheduler's own variables reached it, as one line `NAME NODE RANK HOST PORT LEAKED` ("-" where
unset) on stdout and, when RECORD_DIR is set, in a file of its own there."""

from __future__ import annotations

import stat
from pathlib import Path

LAUNCHER = r"""#!/usr/bin/env bash
rank=""; ip=""; port=""; config=""
while [ $# -gt 0 ]; do
  case "$1" in
    --node-rank|--node_rank|--machine_rank) rank="$2"; shift;;
    --node-rank=*|--node_rank=*|--machine_rank=*) rank="${1#*=}";;
    --master-addr|--master_addr|--main_process_ip) ip="$2"; shift;;
    --master-addr=*|--master_addr=*|--main_process_ip=*) ip="${1#*=}";;
    --master-port|--master_port|--main_process_port) port="$2"; shift;;
    --master-port=*|--master_port=*|--main_process_port=*) port="${1#*=}";;
    --config_file|--config-file) config="$2"; shift;;
    --config_file=*|--config-file=*|--accelerate-config=*) config="${1#*=}";;
  esac
  shift
done
if [ -n "$config" ]; then
  [ -n "$rank" ] || rank="$(sed -n 's/^machine_rank: *//p' "$config")"
  [ -n "$ip" ] || ip="$(sed -n 's/^main_process_ip: *//p' "$config")"
  [ -n "$port" ] || port="$(sed -n 's/^main_process_port: *//p' "$config")"
fi
leaked="$(env | grep -E '^(RANK|WORLD_SIZE|MASTER_ADDR|MASTER_PORT|PET_[A-Z_]*)=' | cut -d= -f1 | sort | tr '\n' ,)"
line="$(basename "$0") ${SLURM_NODEID:--} ${rank:--} ${ip:--} ${port:--} ${leaked:--}"
echo "$line"
if [ -n "${RECORD_DIR:-}" ]; then echo "$line" > "$RECORD_DIR/launch.$$"; fi
"""
LAUNCHERS = ("accelerate", "torchrun", "opentau-train")


def write_launchers(folder: Path) -> Path:
    for name in LAUNCHERS:
        (folder / name).write_text(LAUNCHER)
        (folder / name).chmod(0o755 | stat.S_IXUSR)
    return folder
