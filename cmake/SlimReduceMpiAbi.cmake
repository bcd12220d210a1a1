# Which MPI family (ABI) the library is built for: an LD_PRELOAD library
# speaks one MPI ABI, and the two families differ in every handle type (Open
# MPI's handles are pointers, the MPICH family's, MPICH, Intel MPI, MVAPICH
# and Cray MPICH, are ints). docs/architecture.md, "Two MPI builds".
#
#   -DSLIMREDUCE_MPI_ABI=openmpi|mpich   build against that family: where the
#       family's suffixed wrappers and launcher are installed side by side
#       (Debian: mpicc.mpich, mpiexec.mpich), they are used;
#   -DMPI_C_COMPILER=mpicc.mpich         the same, read from the wrapper's name;
#   neither                              the MPI that find_package(MPI) finds.
#
# include() it twice: with SLIMREDUCE_MPI_ABI_STEP=before, ahead of
# find_package(MPI), and with after, once it has run. Sets
# SLIMREDUCE_MPI_ABI_BUILT (openmpi or mpich) and SLIMREDUCE_MPI_LIBRARY_NAME.

# The library's name for a family (openmpi or mpich) into `out`: it says its
# ABI; Open MPI's keeps the plain name (the default). Also for the other
# family's library of -DSLIMREDUCE_ALSO_MPI_ABI (SlimReduceOtherAbi.cmake).
function(slimreduce_mpi_library_name abi out)
  if(abi STREQUAL "mpich")
    set(${out} slimreduce-mpich PARENT_SCOPE)
  else()
    set(${out} slimreduce PARENT_SCOPE)
  endif()
endfunction()

set(SLIMREDUCE_MPI_ABI "" CACHE STRING
    "MPI family to build against: openmpi or mpich (empty: the MPI that is found)")
set_property(CACHE SLIMREDUCE_MPI_ABI PROPERTY STRINGS "" openmpi mpich)

if(SLIMREDUCE_MPI_ABI_STEP STREQUAL "before")
  if(SLIMREDUCE_MPI_ABI AND NOT SLIMREDUCE_MPI_ABI MATCHES "^(openmpi|mpich)$")
    message(FATAL_ERROR "SLIMREDUCE_MPI_ABI='${SLIMREDUCE_MPI_ABI}' is not accepted; "
                        "expected openmpi or mpich")
  endif()
  set(_sr_abi "${SLIMREDUCE_MPI_ABI}")
  if(NOT _sr_abi AND MPI_C_COMPILER MATCHES "\\.(openmpi|mpich)$")
    set(_sr_abi "${CMAKE_MATCH_1}")
  endif()
  if(_sr_abi)
    # The family's own wrappers and launcher, where both families are installed
    # (FindMPI would otherwise take the unsuffixed mpiexec: the default family's).
    set(_sr_names_C mpicc.${_sr_abi})
    set(_sr_names_CXX mpicxx.${_sr_abi} mpic++.${_sr_abi})
    set(_sr_names_Fortran mpifort.${_sr_abi} mpif90.${_sr_abi})
    foreach(_sr_lang C CXX Fortran)
      if(NOT MPI_${_sr_lang}_COMPILER)
        find_program(_sr_wrapper_${_sr_lang} NAMES ${_sr_names_${_sr_lang}})
        if(_sr_wrapper_${_sr_lang})
          set(MPI_${_sr_lang}_COMPILER "${_sr_wrapper_${_sr_lang}}" CACHE FILEPATH
              "MPI ${_sr_lang} compiler wrapper (${_sr_abi})")
        endif()
      endif()
    endforeach()
    if(NOT MPIEXEC_EXECUTABLE)
      if(_sr_abi STREQUAL "mpich")
        find_program(_sr_launcher NAMES mpiexec.mpich mpiexec.hydra)
      else()
        find_program(_sr_launcher NAMES mpirun.openmpi mpiexec.openmpi)
      endif()
      if(_sr_launcher)
        set(MPIEXEC_EXECUTABLE "${_sr_launcher}" CACHE FILEPATH "MPI launcher (${_sr_abi})")
      endif()
    endif()
  endif()
  return()
endif()

# After find_package(MPI): the family of the mpi.h that was found, by the
# macros each family's header defines.
include(CheckSymbolExists)
set(CMAKE_REQUIRED_INCLUDES ${MPI_C_INCLUDE_DIRS})
set(CMAKE_REQUIRED_QUIET ON)
check_symbol_exists(OPEN_MPI mpi.h SLIMREDUCE_MPI_H_IS_OPEN_MPI)
check_symbol_exists(MPICH mpi.h SLIMREDUCE_MPI_H_IS_MPICH)
unset(CMAKE_REQUIRED_INCLUDES)
unset(CMAKE_REQUIRED_QUIET)
if(SLIMREDUCE_MPI_H_IS_OPEN_MPI)
  set(SLIMREDUCE_MPI_ABI_BUILT openmpi)
elseif(SLIMREDUCE_MPI_H_IS_MPICH)
  set(SLIMREDUCE_MPI_ABI_BUILT mpich)
else()
  message(FATAL_ERROR "SlimReduce: the mpi.h in '${MPI_C_INCLUDE_DIRS}' is neither Open MPI's "
                      "nor of the MPICH family (MPICH, Intel MPI, MVAPICH): no build for it")
endif()
if(SLIMREDUCE_MPI_ABI AND NOT SLIMREDUCE_MPI_ABI STREQUAL SLIMREDUCE_MPI_ABI_BUILT)
  message(FATAL_ERROR "SlimReduce: SLIMREDUCE_MPI_ABI=${SLIMREDUCE_MPI_ABI}, but the MPI found "
                      "(${MPI_C_COMPILER}, ${MPI_C_INCLUDE_DIRS}) is ${SLIMREDUCE_MPI_ABI_BUILT}: "
                      "give that family's wrapper with -DMPI_C_COMPILER=")
endif()

slimreduce_mpi_library_name(${SLIMREDUCE_MPI_ABI_BUILT} SLIMREDUCE_MPI_LIBRARY_NAME)

# The tests launch with MPIEXEC_EXECUTABLE: it must be the same family's.
if(MPIEXEC_EXECUTABLE)
  execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _sr_version
                  ERROR_VARIABLE _sr_version TIMEOUT 20)
  set(_sr_launcher_abi "")
  if(_sr_version MATCHES "Open MPI|OpenRTE")
    set(_sr_launcher_abi openmpi)
  elseif(_sr_version MATCHES "HYDRA|MPICH")
    set(_sr_launcher_abi mpich)
  endif()
  if(_sr_launcher_abi AND NOT _sr_launcher_abi STREQUAL SLIMREDUCE_MPI_ABI_BUILT)
    set(_sr_hint "")
    if(NOT SLIMREDUCE_MPI_ABI)  # it finds the family's launcher where both are installed
      set(_sr_hint " (or -DSLIMREDUCE_MPI_ABI=${SLIMREDUCE_MPI_ABI_BUILT})")
    endif()
    message(FATAL_ERROR "SlimReduce: building for ${SLIMREDUCE_MPI_ABI_BUILT}, but the launcher "
                        "${MPIEXEC_EXECUTABLE} is ${_sr_launcher_abi}'s: give this family's with "
                        "-DMPIEXEC_EXECUTABLE=${_sr_hint}")
  endif()
endif()
message(STATUS "SlimReduce: MPI ABI ${SLIMREDUCE_MPI_ABI_BUILT} "
               "(lib${SLIMREDUCE_MPI_LIBRARY_NAME}.so, launcher ${MPIEXEC_EXECUTABLE})")
