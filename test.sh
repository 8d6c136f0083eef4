#!/usr/bin/env bash
# Install what is missing, build, and run every test through ctest.
#   ./test.sh            all tests except those labelled slow (the CI run)
#   ./test.sh --slow     also the slow tiers (validation against published figures, long fuzzing)
#   ./test.sh --sanitize the same tests in an AddressSanitizer+UBSan build (build-asan/)
#   ./test.sh --tsan     the tests that run engines and sweeps in threads, under ThreadSanitizer
#   ./test.sh --fuzz     fuzz the scenario loader for FUZZ_SECONDS (default 30) with libFuzzer
#                        (clang, ASan+UBSan), seeded from the shipped scenarios
set -euo pipefail
cd "$(dirname "$0")"
source .ci/setup.sh
twin_install_missing "${twin_packages[@]}"
dir=build; ctest_args=(-LE slow); cmake_args=()
for a in "$@"; do
  case "$a" in
    --slow) ctest_args=() ;;
    --sanitize) dir=build-asan; cmake_args+=(-DTWIN_SANITIZE=address,undefined -DTWIN_CUDA=OFF) ;;
    --tsan) dir=build-tsan; cmake_args+=(-DTWIN_SANITIZE=thread -DTWIN_CUDA=OFF)
            ctest_args=(-R "^(test_sim|test_scenarios)$") ;;
    --fuzz) fuzz=1 ;;
    *) echo "test.sh: unknown option $a" >&2; exit 2 ;;
  esac
done
if [ "${fuzz:-0}" = 1 ]; then
  twin_install_missing clang libclang-rt-14-dev
  cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DTWIN_FUZZ=ON -DTWIN_SANITIZE=address,undefined -DTWIN_CUDA=OFF \
    >build-fuzz.configure.log 2>&1 || { cat build-fuzz.configure.log; exit 1; }
  cmake --build build-fuzz -j"$(nproc)" --target twin-fuzz-loader twin-fuzz-sweep
  corpus=build-fuzz/corpus; mkdir -p "$corpus" build-fuzz/corpus-sweep
  cp scenarios/*.json scenarios/ladder/*.json tests/golden/small.json tests/data/*.json \
     tests/data/fuzz/* tests/data/fuzz-seeds/* "$corpus"/
  cp tests/data/fuzz-sweep-seeds/* build-fuzz/corpus-sweep/
  # Two thirds of the time to the loader, a third to the sweep (its runs are slower).
  total="${FUZZ_SECONDS:-30}"; sweep_s=$(( total / 3 > 1 ? total / 3 : 1 )); loader_s=$(( total - sweep_s ))
  build-fuzz/twin-fuzz-loader "$corpus" -max_total_time="$loader_s" -max_len=8192 \
    -timeout=10 -print_final_stats=1 2>&1 | tail -n 25
  rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || exit "$rc"
  build-fuzz/twin-fuzz-sweep build-fuzz/corpus-sweep -max_total_time="$sweep_s" -max_len=2048 \
    -timeout=20 -print_final_stats=1 2>&1 | tail -n 25
  exit "${PIPESTATUS[0]}"
fi
if [ "$dir" = build ]; then
  twin_install_missing chromium  # the browser test of `twin report`
  twin_install_missing openmpi-bin libopenmpi-dev  # the sweep's MPI mode (optional for run.sh)
  twin_web_setup
else  # sanitizer builds: the browser test's simulations would take too long there
  ctest_args=(-LE "slow|browser|mpi")  # Open MPI's own allocations would trip LeakSanitizer
  [ "$dir" = build-tsan ] && ctest_args=(-R "^(test_sim|test_scenarios)$")
fi
twin_build "$dir" "${cmake_args[@]}"
ctest --test-dir "$dir" --output-on-failure -j"$(nproc)" "${ctest_args[@]}"
