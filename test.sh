#!/usr/bin/env bash
# Install what is missing, build, and run every test through ctest.
#   ./test.sh            all tests except those labelled slow (the CI run)
#   ./test.sh --slow     also the slow tiers (validation against published figures, long fuzzing)
#   ./test.sh --sanitize the same tests in an AddressSanitizer+UBSan build (build-asan/)
#   ./test.sh --tsan     the tests that run engines and sweeps in threads, under ThreadSanitizer
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
    *) echo "test.sh: unknown option $a" >&2; exit 2 ;;
  esac
done
twin_build "$dir" "${cmake_args[@]}"
ctest --test-dir "$dir" --output-on-failure -j"$(nproc)" "${ctest_args[@]}"
