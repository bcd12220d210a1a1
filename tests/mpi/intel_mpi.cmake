# Intel MPI, of the MPICH family (one ABI), from PyPI's impi-rt
# (tests/mpi/intel_mpi.sh): the MPICH build's library and programs, built
# against Debian's MPICH, run under Intel's library and launcher unchanged.
# Included by tests/mpi/mpich.cmake (label mpich). The venv is made once per
# machine by the impi_rt_venv fixture; where PyPI cannot be reached it skips,
# and the tests below skip with it (scripts/not_run.sh refuses that in CI
# unless PyPI's refusal is confirmed). Two ranks, one a core: Intel's ranks,
# like MPICH's, poll while they wait.
set(intel_mpi ${CMAKE_CURRENT_SOURCE_DIR}/intel_mpi.sh)
add_test(NAME impi_rt_venv COMMAND ${intel_mpi} setup)
set_tests_properties(impi_rt_venv PROPERTIES LABELS mpich TIMEOUT 900 SKIP_RETURN_CODE 77
                                             FIXTURES_SETUP impi_rt)
set(impi_tests)
# The job ran under Intel MPI (its own startup line), to its end, compressed.
add_test(NAME impi_runs_intel_mpi_np2
         COMMAND ${intel_mpi} identify $<TARGET_FILE:slimreduce> $<TARGET_FILE:report_job>)
list(APPEND impi_tests impi_runs_intel_mpi_np2)
# Whole jobs, their reports checked against their known traffic: C, and
# Fortran through Intel's own bindings (MPI_IN_PLACE among the calls).
set(impi_launch ${intel_mpi} mpiexec -np 2)
add_test(NAME impi_job_c_report_fp16_np2
         COMMAND ${intel_mpi} ready ${CHECK_JOB} report --lib $<TARGET_FILE:slimreduce> --np 2 --job c --mpi mpich
                 --compressor fp16 -- ${impi_launch} --program $<TARGET_FILE:report_job>)
list(APPEND impi_tests impi_job_c_report_fp16_np2)
if(SLIMREDUCE_HAVE_FORTRAN)
  add_test(NAME impi_job_fortran_report_bf16_np2
           COMMAND ${intel_mpi} ready ${CHECK_JOB} report --lib $<TARGET_FILE:slimreduce> --np 2 --job fortran
                   --mpi mpich --compressor bf16 -- ${impi_launch}
                   --program $<TARGET_FILE:fortran_job>)
  list(APPEND impi_tests impi_job_fortran_report_bf16_np2)
endif()
# The multi-rank suites' programs: dense casts, queued MPI_Iallreduce
# batches, and int8 on the edge inputs, each result checked as under MPICH.
set(preload -genv LD_PRELOAD $<TARGET_FILE:slimreduce>)
add_test(NAME impi_dense_fp16_np2
         COMMAND ${impi_launch} ${preload} -genv SLIMREDUCE_COMPRESSOR fp16
                 -genv SLIMREDUCE_MIN_BYTES 4 $<TARGET_FILE:test_mpi_dense>
                 --gtest_filter=-ErrorFeedback.*)
add_test(NAME impi_iallreduce_topk_np2
         COMMAND ${impi_launch} ${preload} -genv SLIMREDUCE_COMPRESSOR topk
                 -genv SLIMREDUCE_MIN_BYTES 4096 -genv SLIMREDUCE_ERROR_FEEDBACK 1
                 -genv SLIMREDUCE_TOPK_RATIO 1 $<TARGET_FILE:test_mpi_iallreduce>
                 --gtest_filter=-Priority.*)
add_test(NAME impi_edge_inputs_int8_np2
         COMMAND ${impi_launch} ${preload} -genv SLIMREDUCE_COMPRESSOR int8
                 -genv SLIMREDUCE_MIN_BYTES 4 $<TARGET_FILE:test_mpi_edge_inputs>)
list(APPEND impi_tests impi_dense_fp16_np2 impi_iallreduce_topk_np2 impi_edge_inputs_int8_np2)
set_tests_properties(${impi_tests} PROPERTIES LABELS mpich TIMEOUT 300 SKIP_RETURN_CODE 77
                                              FIXTURES_REQUIRED impi_rt)
