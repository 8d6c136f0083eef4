#!/usr/bin/env bash
# Issue #21: `mpirun -n 2 twin sweep ...` (points handed out over MPI ranks) writes exactly the
# file `twin sweep --jobs 1` writes. Usage: mpi_sweep.sh TWIN SCENARIO; exit 77 (skipped) when
# no mpirun is installed.
set -euo pipefail
twin=$1 scenario=$2
command -v mpirun >/dev/null || { echo "skipped: no mpirun (apt-get install openmpi-bin libopenmpi-dev)"; exit 77; }
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
grid=(--grid nccl.max_ctas=8,16,32 --grid training.seq_len=2048,4096,-1)  # -1: a point that cannot run
"$twin" sweep "$scenario" "${grid[@]}" --jobs 1 --quiet --out "$dir/one.csv"
# Open MPI refuses root without these, and 2 ranks on fewer cores without --oversubscribe.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
extra=(); mpirun --version 2>&1 | grep -q "Open MPI" && extra=(--oversubscribe)
mpirun "${extra[@]}" -n 2 "$twin" sweep "$scenario" "${grid[@]}" --quiet --out "$dir/mpi.csv"
cmp "$dir/one.csv" "$dir/mpi.csv"
[ ! -e "$dir/mpi.csv.partial" ] || { echo "the progress file was left behind"; exit 1; }
echo "mpirun -n 2: $(($(wc -l <"$dir/mpi.csv") - 1)) points, byte-identical to --jobs 1"
