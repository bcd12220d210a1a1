# How the multi-rank tests launch their ranks, in the words of the build's MPI
# family (SLIMREDUCE_MPI_ABI_BUILT, cmake/SlimReduceMpiAbi.cmake), so that one
# test definition serves Open MPI's mpirun and the MPICH family's Hydra
# (mpiexec.mpich):
#   SLIMREDUCE_MPIRUN         the launcher and its fixed options; `-np N` follows
#                             in both families
#   slimreduce_mpi_launch(OUT RANKS n [ENV NAME=VALUE ...])
#                             the launcher for n ranks, each with the variables
#                             set: Open MPI `-x NAME=VALUE`, Hydra `-genv NAME VALUE`
#   add_mpi_test(NAME RANKS TARGET [ENV NAME=VALUE ...] [ARGS ...])
#                             TARGET under the launcher, libslimreduce preloaded
#   add_preloaded_gtest(NAME) a GoogleTest program for add_mpi_test
#   add_job_test(NAME MODE RANKS JOB PROGRAM... [OPTIONS ...])
#                             a whole job under check_job.py, its report checked

if(SLIMREDUCE_MPI_ABI_BUILT STREQUAL "mpich")
  # Hydra runs as root, oversubscribes and passes its environment on by default.
  set(SLIMREDUCE_MPIRUN ${MPIEXEC_EXECUTABLE})
  set(SLIMREDUCE_MPI_TEST_LABEL mpich)
  set(SLIMREDUCE_JOB_TEST_LABEL mpich)
else()
  # Shared-memory transport without single-copy: containers often forbid process_vm_readv.
  # The point-to-point layer named (ob1, which Debian's Open MPI picks anyway where UCX is
  # excluded): choosing it opens and probes the cm component and its transports first,
  # 0.2 s of each launch spent waiting (0.31 s -> 0.10 s for a 2-rank MPI_Init/Finalize).
  set(SLIMREDUCE_MPIRUN ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe
      --mca btl_vader_single_copy_mechanism none --mca pml ob1)
  set(SLIMREDUCE_MPI_TEST_LABEL mpi)
  set(SLIMREDUCE_JOB_TEST_LABEL job)
endif()

function(slimreduce_mpi_launch out)
  cmake_parse_arguments(LAUNCH "" "RANKS" "ENV" ${ARGN})
  set(command ${SLIMREDUCE_MPIRUN} -np ${LAUNCH_RANKS})
  foreach(setting ${LAUNCH_ENV})
    if(SLIMREDUCE_MPI_ABI_BUILT STREQUAL "mpich")
      string(FIND "${setting}" "=" equals)
      string(SUBSTRING "${setting}" 0 ${equals} name)
      math(EXPR start "${equals} + 1")
      string(SUBSTRING "${setting}" ${start} -1 value)
      list(APPEND command -genv ${name} ${value})
    else()
      list(APPEND command -x ${setting})
    endif()
  endforeach()
  set(${out} ${command} PARENT_SCOPE)
endfunction()

function(add_mpi_test name ranks target)
  cmake_parse_arguments(MPI_TEST "" "" "ENV;ARGS" ${ARGN})
  set(preload LD_PRELOAD=$<TARGET_FILE:slimreduce>)
  set(extra)
  if(SLIMREDUCE_SANITIZE)  # the ASan runtime first (the MPI's own leaks are not ours)
    set(preload LD_PRELOAD=${SLIMREDUCE_ASAN_RUNTIME}:$<TARGET_FILE:slimreduce>)
    set(extra ASAN_OPTIONS=detect_leaks=0)
  endif()
  slimreduce_mpi_launch(launch RANKS ${ranks} ENV ${preload} ${extra} ${MPI_TEST_ENV})
  add_test(NAME ${name} COMMAND ${launch} $<TARGET_FILE:${target}> ${MPI_TEST_ARGS})
  set_tests_properties(${name} PROPERTIES TIMEOUT 300 LABELS ${SLIMREDUCE_MPI_TEST_LABEL})
endfunction()

# It reaches the library only through MPI and the C API (dlsym).
function(add_preloaded_gtest name)
  add_executable(${name} ${CMAKE_CURRENT_SOURCE_DIR}/${name}.cc)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE GTest::gtest MPI::MPI_C ${CMAKE_DL_LIBS})
endfunction()

find_package(Python3 REQUIRED COMPONENTS Interpreter)
set(CHECK_JOB ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/check_job.py)

function(add_job_test name mode ranks job)
  cmake_parse_arguments(JOB_TEST "" "" "PROGRAM;OPTIONS" ${ARGN})
  add_test(NAME ${name}
           COMMAND ${CHECK_JOB} ${mode} --lib $<TARGET_FILE:slimreduce> --np ${ranks} --job ${job}
                   --mpi ${SLIMREDUCE_MPI_ABI_BUILT} ${JOB_TEST_OPTIONS} -- ${SLIMREDUCE_MPIRUN}
                   -np ${ranks} --program ${JOB_TEST_PROGRAM})
  set_tests_properties(${name} PROPERTIES TIMEOUT 300 LABELS ${SLIMREDUCE_JOB_TEST_LABEL})
endfunction()
