# Finds cuDNN (header cudnn.h + libcudnn). Hint: -DCUDNN_ROOT=/path or the CUDNN_ROOT environment variable.
find_path(CUDNN_INCLUDE_DIR cudnn.h
  HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda /usr
  PATH_SUFFIXES include include/x86_64-linux-gnu)
find_library(CUDNN_LIBRARY cudnn
  HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda /usr
  PATH_SUFFIXES lib64 lib lib/x86_64-linux-gnu)
if(CUDNN_INCLUDE_DIR AND EXISTS "${CUDNN_INCLUDE_DIR}/cudnn_version.h")
  file(STRINGS "${CUDNN_INCLUDE_DIR}/cudnn_version.h" _cudnn_lines REGEX "#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) ")
  string(REGEX REPLACE ".*CUDNN_MAJOR ([0-9]+).*" "\\1" _major "${_cudnn_lines}")
  string(REGEX REPLACE ".*CUDNN_MINOR ([0-9]+).*" "\\1" _minor "${_cudnn_lines}")
  string(REGEX REPLACE ".*CUDNN_PATCHLEVEL ([0-9]+).*" "\\1" _patch "${_cudnn_lines}")
  set(CUDNN_VERSION "${_major}.${_minor}.${_patch}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CUDNN REQUIRED_VARS CUDNN_LIBRARY CUDNN_INCLUDE_DIR VERSION_VAR CUDNN_VERSION
  REASON_FAILURE_MESSAGE "cuDNN not found: install it (Debian: apt-get install nvidia-cudnn, or NVIDIA's cudnn9-cuda-13 package) or pass -DCUDNN_ROOT=<prefix containing include/cudnn.h>")
if(CUDNN_FOUND AND NOT TARGET CUDNN::cudnn)
  add_library(CUDNN::cudnn UNKNOWN IMPORTED)
  set_target_properties(CUDNN::cudnn PROPERTIES IMPORTED_LOCATION "${CUDNN_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_INCLUDE_DIR}")
endif()
