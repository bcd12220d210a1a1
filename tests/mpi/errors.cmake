# Errors found inside SlimReduce reach the communicator's error handler, as
# the real call's would (out of memory under a capped address space); under
# MPI_ERRORS_ARE_FATAL the job must stop, after our error line, and no rank
# may go on (Open MPI's own abort message can be lost when ranks die
# together). Included by tests/mpi/CMakeLists.txt (label mpi) and mpich.cmake
# (label mpich).
#   add_error_handler_tests(PREFIX NO_MEM_TEXT)
#     NO_MEM_TEXT: how the MPI's MPI_Error_string names MPI_ERR_NO_MEM, as our
#     error line carries it (Open MPI: "MPI_ERR_NO_MEM"; MPICH: "Unable to
#     allocate memory").
add_preloaded_gtest(test_mpi_errors)

function(add_error_handler_tests prefix no_mem_text)
  add_mpi_test(${prefix}_fp16_np2 2 test_mpi_errors
               ENV SLIMREDUCE_COMPRESSOR=fp16 SLIMREDUCE_ERROR_FEEDBACK=1
               ARGS --gtest_filter=-FatalHandler.*:TopkErrors.*)
  # Whole calls: the out-of-memory test sizes its cap for a 16 MiB call's workspace.
  add_mpi_test(${prefix}_topk_np3 3 test_mpi_errors
               ENV SLIMREDUCE_COMPRESSOR=topk SLIMREDUCE_TOPK_RATIO=1 SLIMREDUCE_ERROR_FEEDBACK=1
                   SLIMREDUCE_PARTITION_BYTES=1G
               ARGS --gtest_filter=-FatalHandler.*)
  slimreduce_mpi_launch(launch RANKS 2 ENV LD_PRELOAD=$<TARGET_FILE:slimreduce>
                        SLIMREDUCE_COMPRESSOR=bf16 SLIMREDUCE_ERROR_FEEDBACK=1)
  string(REPLACE ";" " " launch "${launch}")
  add_test(NAME ${prefix}_fatal_bf16_np2
           COMMAND sh -c "out=$(${launch} $<TARGET_FILE:test_mpi_errors> \
--gtest_filter=FatalHandler.* 2>&1); rc=$?; echo \"$out\"; echo \"exit code $rc\"; \
[ $rc -ne 0 ] && echo \"$out\" | grep -q 'failed in SlimReduce: ${no_mem_text}' && \
! echo \"$out\" | grep -q 'continued after a fatal error'")
  set_tests_properties(${prefix}_fatal_bf16_np2 PROPERTIES TIMEOUT 120
                                                           LABELS ${SLIMREDUCE_MPI_TEST_LABEL})
endfunction()
