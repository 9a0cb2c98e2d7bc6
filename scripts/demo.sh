#!/usr/bin/env bash
# demo.sh - README command 1: set up, then compare the baseline policies on the bundled Muri
# trace1 (1,494 Philly-derived jobs) on an 8-node x 8-GPU cluster; prints the table and writes
# a JCT CDF plot to results/muri-trace1-8x8.png.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
mkdir -p results
.venv/bin/slurm-sched compare --trace muri/trace1.csv --cluster 8x8 \
  --policies "${POLICIES:-fifo,sjf,srtf,tiresias}" --plot results/muri-trace1-8x8.png "$@"
