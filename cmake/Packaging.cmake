# Installing dpbench (`cmake --install build --prefix DIR`) and packaging it for Debian (`cpack -G
# DEB` in the build folder): the executable, the sweep as `dpbench-sweep`, the PyTorch twins, the
# reference results, the docs and the bash completion (DPBENCH_BASH_COMPLETION, made at build
# time). README.md ("Install") says how; tests/scripts/test_package.sh builds, unpacks and runs
# the package.
include(GNUInstallDirs)
# Installing and packaging take the build as it is, and build nothing first (`make install` and
# cpack's preinstall step would otherwise build everything): the package test runs cpack beside
# the other tests, whose executables must not be relinked under them. Build, then install.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)

# ---- what is installed where -------------------------------------------------------------------
install(TARGETS dpbench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The sweep finds the dpbench beside it (scripts/sweep.sh: "the dpbench beside this script").
install(PROGRAMS scripts/sweep.sh DESTINATION ${CMAKE_INSTALL_BINDIR} RENAME dpbench-sweep)
# The twins import one another (pytorch_ddp.py imports pytorch_cnn.py): one folder keeps them together.
file(GLOB DPBENCH_TWIN_SCRIPTS CONFIGURE_DEPENDS scripts/bench/*.py)
install(FILES ${DPBENCH_TWIN_SCRIPTS} DESTINATION ${CMAKE_INSTALL_DATADIR}/dpbench/bench)
file(GLOB DPBENCH_DOCS CONFIGURE_DEPENDS docs/*.md)
install(FILES README.md ${DPBENCH_DOCS} DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES ${DPBENCH_BASH_COMPLETION} DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)
# Reference results (dpbench's own measured runs, README "Is my number normal?") go from the
# reference_results/ folder at the top of the tree to share/dpbench/reference_results. dpbench
# finds them (cli/reference_lookup.cpp) in the checkout when it runs from this build tree, and
# beside its bin/ when installed: both paths are compiled in here, where the layout is known.
set(DPBENCH_REFERENCE_RESULTS_DESTINATION ${CMAKE_INSTALL_DATADIR}/dpbench/reference_results)
install(DIRECTORY reference_results/ DESTINATION ${DPBENCH_REFERENCE_RESULTS_DESTINATION})
file(RELATIVE_PATH _installed_reference_results /prefix/${CMAKE_INSTALL_BINDIR}
     /prefix/${DPBENCH_REFERENCE_RESULTS_DESTINATION})
set_source_files_properties(cli/reference_lookup.cpp PROPERTIES COMPILE_DEFINITIONS
  "DPBENCH_BUILD_TREE=\"${CMAKE_BINARY_DIR}\";DPBENCH_CHECKOUT_REFERENCE_RESULTS=\"${CMAKE_CURRENT_SOURCE_DIR}/reference_results\";DPBENCH_INSTALLED_REFERENCE_RESULTS=\"${_installed_reference_results}\"")

# ---- the Debian package ------------------------------------------------------------------------
# Note [the package's dependencies]
# One Depends entry per shared library dpbench links (readelf -d: NEEDED), named here rather than
# by CPACK_DEBIAN_PACKAGE_SHLIBDEPS. dpkg-shlibdeps names the package that installed a library,
# and the CUDA toolkit of the build machines is NVIDIA's tarball under /usr/local/cuda, which no
# package owns: CPack calls it with --ignore-missing-info, and the package it makes here depends
# on libc6, libstdc++6, libgcc-s1 and libopenmpi3 only, without the CUDA runtime, cuBLAS, cuDNN
# or NCCL. It also needs dpkg-dev, which scripts/setup.sh does not install. The CUDA libraries
# are named as NVIDIA's repository packages them for the toolkit dpbench was built with, with
# Debian's own packages as alternatives where Debian has them. The C and C++ runtimes' minimums
# follow the symbol versions the binary needs (GLIBC_2.34: pthread in libc; the GLIBCXX of the
# g++ that built it). tests/scripts/test_package.sh checks that every NEEDED library has its
# entry here and that the binary needs no GLIBC newer than the minimum.
set(_cuda_major ${CUDAToolkit_VERSION_MAJOR})
set(_cuda_minor ${CUDAToolkit_VERSION_MAJOR}-${CUDAToolkit_VERSION_MINOR})
# Debian packages CUDA 12's runtime and cuBLAS itself (non-free: libcudart12, libcublas12,
# libcublaslt12) and has an installer of cuDNN 9 for CUDA 12 (contrib: nvidia-cudnn); for other
# versions only NVIDIA's packages provide them.
set(_cudart_debian "")
set(_cublas_debian "")
set(_cublaslt_debian "")
set(_cudnn_debian "")
if(_cuda_major EQUAL 12)
  set(_cudart_debian " | libcudart12")
  set(_cublas_debian " | libcublas12")
  set(_cublaslt_debian " | libcublaslt12")
  set(_cudnn_debian " | nvidia-cudnn")
endif()
set(_libstdcxx "libstdc++6")
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  string(REGEX MATCH "^[0-9]+" _gcc_major "${CMAKE_CXX_COMPILER_VERSION}")
  set(_libstdcxx "libstdc++6 (>= ${_gcc_major})")  # the GLIBCXX symbols of the g++ that built it
endif()
# "soname: package alternatives", one per library: the test reads the list as written here.
set(DPBENCH_PACKAGE_LIBRARIES
  "libc.so.6: libc6 (>= 2.34)"
  "libm.so.6: libc6 (>= 2.34)"
  "ld-linux-x86-64.so.2: libc6 (>= 2.34)"
  "ld-linux-aarch64.so.1: libc6 (>= 2.34)"
  "libstdc++.so.6: ${_libstdcxx}"
  "libgcc_s.so.1: libgcc-s1 (>= 3.0)"
  "libcudart.so.${_cuda_major}: cuda-cudart-${_cuda_minor}${_cudart_debian}"
  "libcublas.so.${_cuda_major}: libcublas-${_cuda_minor}${_cublas_debian}"
  "libcublasLt.so.${_cuda_major}: libcublas-${_cuda_minor}${_cublaslt_debian}"
  "libcudnn.so.9: libcudnn9-cuda-${_cuda_major}${_cudnn_debian}"
  "libnccl.so.2: libnccl2")
if(DPBENCH_HAVE_MPI)
  # Open MPI's libmpi.so.40: libopenmpi3 in Debian 12, libopenmpi40 from Debian 13.
  list(APPEND DPBENCH_PACKAGE_LIBRARIES "libmpi.so.40: libopenmpi3 | libopenmpi40")
endif()
set(_depends "")
foreach(_library IN LISTS DPBENCH_PACKAGE_LIBRARIES)
  string(REGEX REPLACE "^[^:]*: " "" _package "${_library}")
  if(NOT _package IN_LIST _depends)
    list(APPEND _depends "${_package}")
  endif()
endforeach()
list(JOIN _depends ", " CPACK_DEBIAN_PACKAGE_DEPENDS)
# For the package test (tests/scripts/test_package.sh): the list above, a library a line.
list(JOIN DPBENCH_PACKAGE_LIBRARIES "\n" _library_lines)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/package_libraries.txt "${_library_lines}\n")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME dpbench)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "data-parallel training benchmark on CUDA, successor of tf_cnn_benchmarks")
# The long description, wrapped as a Debian control file wants it (CPack indents each line).
set(CPACK_PACKAGE_DESCRIPTION
    "dpbench trains real models (ResNet, Inception, VGG, NMT, GPT-2, ...) spread over\n"
    "several GPUs by data parallelism and measures how the synchronisation strategy\n"
    "(parameter server, replicated all-reduce, fully sharded, ...) changes their speed.\n"
    "dpbench-sweep runs it over GPU counts and strategies, and dpbench report turns\n"
    "the results into speedup tables and plots.")
string(CONCAT CPACK_PACKAGE_DESCRIPTION ${CPACK_PACKAGE_DESCRIPTION})
set(CPACK_PACKAGE_CONTACT "dpbench maintainers")
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # dpbench_VERSION_ARCH.deb
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# mpirun for the one-process-per-GPU strategies; the sweep reads results with python3 (else jq,
# else grep); bash-completion loads the completion.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "openmpi-bin, python3, bash-completion")
include(CPack)
