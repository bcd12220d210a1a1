# A rank that dies mid-job (tests/mpi/dead_rank_job.c): rank 1 calls abort()
# inside a compressed call (MPI_Allreduce, or the MPI_Wait of a queued
# MPI_Iallreduce), or exit(1) from another thread during one, so that its exit
# handlers write its report and timeline meanwhile, while the others wait for
# it inside the same collective. The job must end with the MPI's own error,
# well within the 60 s timeout (check_dead_rank.sh: 20 s after the death at
# most; what each MPI family reports is stated there); "none" is the baseline.
# Included by tests/mpi/CMakeLists.txt (label mpi) and mpich.cmake (label mpich).
#   add_dead_rank_tests(PREFIX RUN...)   each RUN "name calls how ranks"
add_executable(dead_rank_job dead_rank_job.c)
target_link_libraries(dead_rank_job PRIVATE MPI::MPI_C Threads::Threads ${CMAKE_DL_LIBS})

function(add_dead_rank_tests prefix)
  foreach(run ${ARGN})
    separate_arguments(run UNIX_COMMAND "${run}")
    list(GET run 0 name)
    list(GET run 1 calls)
    list(GET run 2 how)
    list(GET run 3 ranks)
    set(test ${prefix}_${name}_${calls}_${how}_np${ranks})
    string(REGEX REPLACE "_.*" "" compressor ${name})
    set(settings SLIMREDUCE_COMPRESSOR=${compressor})
    set(check --mpi ${SLIMREDUCE_MPI_ABI_BUILT})
    if(compressor STREQUAL "topk")
      list(APPEND settings SLIMREDUCE_TOPK_RATIO=0.01)
    elseif(compressor STREQUAL "none")
      list(APPEND check --uncompressed)
    endif()
    if(name STREQUAL "fp16_pipelined")  # the helper thread, four partitions a call
      list(APPEND settings SLIMREDUCE_PIPELINE=1 SLIMREDUCE_PARTITION_BYTES=1M)
    elseif(name STREQUAL "topk_sharded")
      list(APPEND settings SLIMREDUCE_TOPK_ALGORITHM=sharded)
    endif()
    if(how STREQUAL "exit")
      set(prefix_of_files ${CMAKE_CURRENT_BINARY_DIR}/${test})
      list(APPEND settings SLIMREDUCE_REPORT=${prefix_of_files}
           SLIMREDUCE_TIMELINE=${prefix_of_files}.trace)
      list(APPEND check --report ${prefix_of_files})
    endif()
    slimreduce_mpi_launch(launch RANKS ${ranks} ENV LD_PRELOAD=$<TARGET_FILE:slimreduce>
                          ${settings})
    add_test(NAME ${test}
             COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check_dead_rank.sh ${check} 60 20 -- ${launch}
                     $<TARGET_FILE:dead_rank_job> ${calls} ${how})
    set_tests_properties(${test} PROPERTIES TIMEOUT 120 LABELS ${SLIMREDUCE_MPI_TEST_LABEL})
  endforeach()
endfunction()
