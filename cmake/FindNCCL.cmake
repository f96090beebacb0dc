# Finds NCCL (header nccl.h + libnccl). Hint: -DNCCL_ROOT=/path or the NCCL_ROOT environment variable.
find_path(NCCL_INCLUDE_DIR nccl.h
  HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda /usr
  PATH_SUFFIXES include)
find_library(NCCL_LIBRARY nccl
  HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_DIR}/../lib /usr/local/cuda /usr
  PATH_SUFFIXES lib64 lib lib/x86_64-linux-gnu)
if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_lines REGEX "#define NCCL_(MAJOR|MINOR|PATCH) ")
  string(REGEX REPLACE ".*NCCL_MAJOR ([0-9]+).*" "\\1" _major "${_nccl_lines}")
  string(REGEX REPLACE ".*NCCL_MINOR ([0-9]+).*" "\\1" _minor "${_nccl_lines}")
  string(REGEX REPLACE ".*NCCL_PATCH ([0-9]+).*" "\\1" _patch "${_nccl_lines}")
  set(NCCL_VERSION "${_major}.${_minor}.${_patch}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR VERSION_VAR NCCL_VERSION
  REASON_FAILURE_MESSAGE "NCCL not found: install it (Debian: apt-get install libnccl-dev, or NVIDIA's libnccl-dev package) or pass -DNCCL_ROOT=<prefix containing include/nccl.h>")
if(NCCL_FOUND AND NOT TARGET NCCL::nccl)
  add_library(NCCL::nccl UNKNOWN IMPORTED)
  set_target_properties(NCCL::nccl PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()
