# Writes OUT (a header defining TWIN_COMMIT) from the source tree's git commit, "-dirty" when the
# tree has changes, "unknown" outside a git checkout; only when its content changes, so that
# builds stay incremental. Run at every build (scenarios/CMakeLists.txt).
execute_process(COMMAND git -C "${SRC}" rev-parse --short=12 HEAD OUTPUT_VARIABLE commit
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
else()
  execute_process(COMMAND git -C "${SRC}" diff --quiet HEAD RESULT_VARIABLE dirty ERROR_QUIET)
  if(NOT dirty EQUAL 0)
    set(commit "${commit}-dirty")
  endif()
endif()
set(text "#define TWIN_COMMIT \"${commit}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE "${OUT}" "${text}")
endif()
