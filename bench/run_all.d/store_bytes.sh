#!/usr/bin/env bash
# Stored bytes per value, recorded and imported from SageMaker Debugger's format (issue 16
# item 3: <= 2 each), with the smdebug JSON-lines size of the same samples as the peer:
# bench/store_bytes_per_value.sh on a 10-minute node (build/bench's store_bench and CLI).
set -euo pipefail
OUT=$1
cd "$(dirname "$0")/../.."
TRAINPROF=build/bench/src/cli/trainprof bash bench/store_bytes_per_value.sh "$OUT/store_bytes" 10
