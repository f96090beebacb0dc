# Writes dpbench's bash completion at build time with the dpbench just built (`dpbench completion
# bash`, generated from its flag tables), replacing the file only when the text changed.
# Inputs: DPBENCH (the executable), OUTPUT.
execute_process(COMMAND ${DPBENCH} completion bash OUTPUT_VARIABLE script ERROR_VARIABLE why RESULT_VARIABLE status)
if(NOT status EQUAL 0 OR NOT script)
  message(FATAL_ERROR "dpbench completion bash failed (${status}): ${why}")
endif()
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
  if(old STREQUAL script)
    return()
  endif()
endif()
file(WRITE ${OUTPUT}.tmp "${script}")
file(RENAME ${OUTPUT}.tmp ${OUTPUT})
