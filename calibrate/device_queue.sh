#!/usr/bin/env bash
# The GPU measurements the open issues waited for, as named steps that each fit one device call
# (≤ 10 minutes), most wanted first — so that a session lent a GPU for minutes spends them on
# measuring, not on assembling commands (reports/calibration/README.md, "Waiting for a GPU").
# All ran on 2026-12-06 (on H200s; `families` on an H100, a held-out card; `gemms`, queued for an
# H100, on a second H200), `static-dynamic` on 2026-12-07 (an H100); the script stays to repeat
# them elsewhere. `gradients` waits for an H200 (its H100 runs: 2026-12-07).
#
#   calibrate/device_queue.sh list                 the steps, their issue and time
#   calibrate/device_queue.sh [--any-gpu] STEP...  run them; results under $OUT (default out/)
#
# Each step writes $OUT/<card>-<date>-<step>.{json,log} beside $OUT/<card>-<date>-nvidia-smi.txt,
# <card> from nvidia-smi (h200, h100, …). The steps measure the H200 the profiles describe: on
# another card they stop unless --any-gpu (its files then carry that card's name and serve as
# held-out checks, as the H100 files of 2026-12-05 do); `pinned` and `pinned-ns` run on any card
# (they measure PyTorch's pinned host allocator). Without a GPU: exit 3, as the harnesses.
set -euo pipefail
cd "$(dirname "$0")/.."

steps=(gradients pinned-ns static-dynamic operands bursts grouped-fresh contention families gemms pinned fp8-gemm attention gemm-alone)
describe() {
  case $1 in
    gradients) echo "#17  ~4 min  the expert GEMMs' backward on the H200: the two micro-step plans with both gradients beside their two-forwards plans (written before any run, 2026-12-07), and grouped_backward_bench.py; done on an H100 2026-12-07" ;;
    static-dynamic) echo "#15  ~1 min  one Triton persistent grouped GEMM with static and with dynamic tile lists, idle and beside 16/40 held SMs, and torch._grouped_mm's CTA ends on an idle GPU (what a dynamic scheduler gains on an idle GPU, JOB.md §6.5); done on an H100 2026-12-07" ;;
    operands) echo "#15  ~5 min  GEMM speed against operand values (randn × 1, 0.1, 0.01, zeros), fresh and sustained, then the grouped GEMMs fresh at randn × 0.1: the H200's micro-step expert GEMMs ran 5–6% faster than the bench's at the same shape; done on an H200 2026-12-06 (no operand effect but zeros)" ;;
    bursts) echo "#15  ~4 min  the power controller's onset behind bursts of GEMMs, after light load and after an idle GPU: calibrate/fit_power.py's data; done on two H100s and an H200 2026-12-06" ;;
    grouped-fresh) echo "#15  ~2 min  grouped GEMMs fresh, right behind the light load and behind one call of themselves: the fit's share of the micro-step's expert-GEMM excess" ;;
    contention) echo "#15  ~2 min  split-K and clustered small-row launches (split_k_more, cluster_pad), every held count; done on an H200 2026-12-06" ;;
    families) echo "#15  ~7 min  the elementwise, FP8 block, grouped-GEMM and attention families at 10 held counts: with --any-gpu on another card, a held-out test of the H200 fit's transfer (twin-fit-contention --held-out-hbm-scale)" ;;
    gemms) echo "#15  ~5 min  cuBLAS bf16 and FP8 GEMMs and Newton–Schulz at the same 10 held counts: the families step's GEMM side; done on a second H200 2026-12-06" ;;
    pinned) echo "#17  ~1 min  what FSDP2's CPU offload pins step by step (any card: PyTorch's host allocator); done on an H100 2026-12-06" ;;
    pinned-ns) echo "#17  ~1 min  Newton–Schulz's results brought home non-blocking: a third pinned set? rounded and with pinned_max_round_threshold_mb:1 (any card)" ;;
    fp8-gemm) echo "#15  ~1 min  torch._scaled_mm behind a GPU sleep: the H200's own FP8 fit (twin-fit-gemm --fp8); done on an H200 2026-12-06" ;;
    attention) echo "#15  ~1 min  SDPA and FlexAttention behind a GPU sleep: attention refit (attention_bench.py --refit); done on an H200 2026-12-06" ;;
    gemm-alone) echo "#15  ~1 min  twin-calibrate's cuBLAS sweep behind a GPU sleep (needs build/twin-calibrate carried); done on an H200 2026-12-06" ;;
    *) return 1 ;;
  esac
}

if [ "${1:-}" = "list" ] || [ $# -eq 0 ]; then
  for s in "${steps[@]}"; do printf '%-11s %s\n' "$s" "$(describe "$s")"; done
  [ $# -eq 0 ] && echo "usage: $0 list | [--any-gpu] STEP..." >&2 && exit 2
  exit 0
fi
any_gpu=false
[ "$1" = "--any-gpu" ] && any_gpu=true && shift
for s in "$@"; do describe "$s" >/dev/null || { echo "$0: unknown step '$s' (see: $0 list)" >&2; exit 2; }; done

name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
[ -n "$name" ] || { echo "$0: no GPU (nvidia-smi found none)" >&2; exit 3; }
card=$(tr '[:upper:]' '[:lower:]' <<<"$name" | grep -o 'h[0-9]\{3\}' | head -1 || true)
card=${card:-gpu}
# `pinned` and `pinned-ns` measure PyTorch's pinned host allocator, not the card: any GPU.
card_bound=false
for s in "$@"; do [ "$s" = pinned ] || [ "$s" = pinned-ns ] || card_bound=true; done
if [ "$card" != h200 ] && $card_bound && ! $any_gpu; then
  echo "$0: this is '$name', not an H200; the steps measure the H200 (--any-gpu: run anyway, as a held-out card)" >&2
  exit 4
fi
out=${OUT:-out}
mkdir -p "$out"
stamp="$card-$(date -u +%Y-%m-%d)"
nvidia-smi >"$out/$stamp-nvidia-smi.txt" 2>&1 || true
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
lib=build-device/libtwin_kernels_c.so
need_lib() { [ -f "$lib" ] || bash calibrate/build-device.sh --lib; }

run_step() {
  local s=$1 f="$out/$stamp-$1"
  echo "== $s ($(describe "$s"))"
  case $s in
    gradients)
      need_lib
      local p d=reports/calibration/micro-step
      for p in max-ctas-16 max-ctas-16-gradients seq-8192 seq-8192-gradients; do
        python3 calibrate/micro_step.py --plan "$d/plan-$p.json" --lib "$lib" --reps 5 \
          --out "$f-micro-step-$p.json" || return 1
      done
      python3 calibrate/grouped_backward_bench.py --reps 20 --out "$f-grouped-backward.json" ;;
    static-dynamic)
      python3 calibrate/static_dynamic_probe.py --held 0,16,40 --reps 5 --out "$f.json" &&
        python3 calibrate/cta_end_probe.py --only grouped --held 0 --reps 3 --out "$f-cta-ends-grouped.json" ;;
    operands)
      python3 calibrate/operand_power_probe.py --cycles 4 --out "$f.json" &&
        python3 calibrate/grouped_gemm_bench.py --fresh 0.5 --reps 3 --operand-scale 0.1 --out "$f-grouped-fresh-0.1.json" ;;
    bursts)
      need_lib
      local plan=reports/calibration/micro-step/plan-max-ctas-16.json counts=0,1,2,3,4,5,7,10,14,20,30,45
      python3 calibrate/power_transient_probe.py --bursts $counts --plan $plan --lib "$lib" --out "$f.json" &&
        python3 calibrate/power_transient_probe.py --bursts $counts --idle-before --plan $plan \
          --lib "$lib" --out "$f-idle-before.json" ;;
    grouped-fresh)
      python3 calibrate/grouped_gemm_bench.py --fresh 0.5 --reps 3 --out "$f.json" &&
        python3 calibrate/grouped_gemm_bench.py --fresh 0.5 --reps 3 --behind-one --out "$f-behind-one.json" ;;
    contention)
      need_lib
      python3 calibrate/contention_bench.py --lib "$lib" --only split_k_more,cluster_pad \
        --held 0,4,8,12,16,24,32,48,64,100,112,124 --launches-held 8,16,32,64,100,112,124 \
        --no-copy --budget-s 500 --commit "$commit" --out "$f.json" ;;
    families)
      need_lib
      python3 calibrate/contention_bench.py --lib "$lib" --only elementwise,fp8_block,grouped,attention,flex \
        --held 0,4,8,16,32,48,64,88,112,124 --no-copy --budget-s 380 --commit "$commit" --out "$f.json" ;;
    gemms)
      need_lib
      python3 calibrate/contention_bench.py --lib "$lib" --only gemm,gemm_fp8,newton_schulz \
        --held 0,4,8,16,32,48,64,88,112,124 --no-copy --budget-s 380 --commit "$commit" --out "$f.json" ;;
    pinned)
      python3 calibrate/pinned_offload_probe.py --steps 6 --optimizer adamw --out "$f.json" ;;
    pinned-ns)
      python3 calibrate/pinned_offload_probe.py --steps 4 --optimizer ns_gpu --out "$f.json" &&
        PYTORCH_CUDA_ALLOC_CONF=pinned_max_round_threshold_mb:1 python3 calibrate/pinned_offload_probe.py \
          --steps 4 --optimizer ns_gpu --out "$f-threshold-1.json" ;;
    fp8-gemm)
      python3 calibrate/fp8_gemm_bench.py --lead-us 100 --out "$f.json" ;;
    attention)
      python3 calibrate/attention_bench.py --tokens 16384 65536 --lead-us 1000 --out "$f.json" ;;
    gemm-alone)
      [ -x build/twin-calibrate ] || { echo "build/twin-calibrate not carried (calibrate/build-device.sh says how)" >&2; return 1; }
      LD_LIBRARY_PATH="$PWD/build/devlib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        build/twin-calibrate --only gemm --lead-us 100 --base h200 --commit "$commit" --out "$f.json" ;;
  esac
}

status=0
for s in "$@"; do
  run_step "$s" 2>&1 | tee "$out/$stamp-$s.log" || status=1
done
exit $status
