# Writes the version header at build time (not configure time), so every binary records the
# commit it was built from, with "-dirty" when the tree had uncommitted changes.
# Inputs: SOURCE_DIR, OUTPUT, VERSION.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE sha OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE sha_status)
if(NOT sha_status EQUAL 0 OR NOT sha)
  set(sha "unknown")
else()
  execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY ${SOURCE_DIR}
                  OUTPUT_VARIABLE changes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(changes)
    set(sha "${sha}-dirty")
  endif()
endif()
set(content "// Generated at build time by cmake/WriteVersion.cmake: the version stamp recorded in every result.
#pragma once
#define DPBENCH_VERSION \"${VERSION}\"
#define DPBENCH_GIT_SHA \"${sha}\"
")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} previous)
endif()
if(NOT "${previous}" STREQUAL "${content}")
  file(WRITE ${OUTPUT} "${content}")
endif()
