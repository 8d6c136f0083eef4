# Runs CMD (a ;-list), expects exit code CODE and, if given, EXPECT in its stderr (in its stdout
# when CODE is 0) and an empty stdout when CODE is non-zero (nothing half-written).
# Usage: cmake -DCMD="a;b" -DCODE=2 -DEXPECT="text" -P tests/expect_exit.cmake
execute_process(COMMAND ${CMD} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL CODE)
  message(FATAL_ERROR "expected exit ${CODE}, got ${rc}\nstdout: ${out}\nstderr: ${err}")
endif()
if(CODE EQUAL 0)
  if(DEFINED EXPECT AND NOT out MATCHES "${EXPECT}")
    message(FATAL_ERROR "stdout does not match '${EXPECT}':\n${out}")
  endif()
elseif(DEFINED EXPECT AND NOT err MATCHES "${EXPECT}")
  message(FATAL_ERROR "stderr does not match '${EXPECT}':\n${err}")
endif()
if(NOT CODE EQUAL 0 AND NOT out STREQUAL "")
  message(FATAL_ERROR "a failing run wrote to stdout:\n${out}")
endif()
message(STATUS "ok: exit ${rc}: ${err}")
