# The other MPI family's library too, in the same build and install (one pip
# wheel that serves both families; docs/architecture.md, "Two MPI builds"):
#
#   -DSLIMREDUCE_ALSO_MPI_ABI=mpich   (or openmpi, the other of the two)
#
# An LD_PRELOAD library speaks one MPI ABI, and every object of the library
# is compiled against one mpi.h, so the other family's library is a second
# build of the library alone: this source tree configured again in a subtree
# of this build (ExternalProject), for that family, with this build's type,
# GPU path setting and compiler launchers, and no tests, benchmarks or
# examples. Its library (and its pkg-config file) is installed beside this
# build's, so `cmake --install` and pip put both in one lib/, where
# slimreduce-run, the CMake package and `python -m slimreduce` find them by
# their names.
set(SLIMREDUCE_ALSO_MPI_ABI "" CACHE STRING
    "Also build the other MPI family's library (openmpi or mpich; empty: this build's alone)")
set_property(CACHE SLIMREDUCE_ALSO_MPI_ABI PROPERTY STRINGS "" openmpi mpich)

if(SLIMREDUCE_ALSO_MPI_ABI)
  if(NOT SLIMREDUCE_ALSO_MPI_ABI MATCHES "^(openmpi|mpich)$")
    message(FATAL_ERROR "SLIMREDUCE_ALSO_MPI_ABI='${SLIMREDUCE_ALSO_MPI_ABI}' is not accepted; "
                        "expected openmpi or mpich")
  endif()
  if(NOT SLIMREDUCE_MPI)
    message(FATAL_ERROR "SLIMREDUCE_ALSO_MPI_ABI=${SLIMREDUCE_ALSO_MPI_ABI}: this build has no MPI "
                        "library of its own to build it beside")
  endif()
  if(SLIMREDUCE_ALSO_MPI_ABI STREQUAL SLIMREDUCE_MPI_ABI_BUILT)
    message(FATAL_ERROR "SLIMREDUCE_ALSO_MPI_ABI=${SLIMREDUCE_ALSO_MPI_ABI} is this build's own "
                        "family; it names the other one")
  endif()
  include(ExternalProject)
  slimreduce_mpi_library_name(${SLIMREDUCE_ALSO_MPI_ABI} _sr_other_name)
  set(_sr_other_dir ${PROJECT_BINARY_DIR}/mpi-abi-${SLIMREDUCE_ALSO_MPI_ABI})
  set(_sr_other_args -DSLIMREDUCE_MPI_ABI=${SLIMREDUCE_ALSO_MPI_ABI} -DSLIMREDUCE_CUDA=${SLIMREDUCE_CUDA}
                     -DSLIMREDUCE_BUILD_TESTS=OFF -DSLIMREDUCE_BUILD_BENCH=OFF
                     -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE})
  foreach(launcher CMAKE_C_COMPILER_LAUNCHER CMAKE_CXX_COMPILER_LAUNCHER
                   CMAKE_CUDA_COMPILER_LAUNCHER)
    if(${launcher})
      list(APPEND _sr_other_args -D${launcher}=${${launcher}})
    endif()
  endforeach()
  # Its library target alone (the tools, examples and checks are this build's).
  ExternalProject_Add(slimreduce_other_abi
    SOURCE_DIR ${PROJECT_SOURCE_DIR}
    BINARY_DIR ${_sr_other_dir}
    CMAKE_ARGS ${_sr_other_args}
    BUILD_COMMAND ${CMAKE_COMMAND} --build ${_sr_other_dir} --target slimreduce
    INSTALL_COMMAND ""
    BUILD_ALWAYS TRUE
    BUILD_BYPRODUCTS ${_sr_other_dir}/interpose/lib${_sr_other_name}.so)
  install(PROGRAMS ${_sr_other_dir}/interpose/lib${_sr_other_name}.so
          DESTINATION ${SLIMREDUCE_INSTALL_LIBDIR})
  install(FILES ${_sr_other_dir}/${_sr_other_name}.pc
          DESTINATION ${SLIMREDUCE_INSTALL_LIBDIR}/pkgconfig)
  message(STATUS "SlimReduce: also lib${_sr_other_name}.so, for ${SLIMREDUCE_ALSO_MPI_ABI} "
                 "(a second build in ${_sr_other_dir})")
endif()
