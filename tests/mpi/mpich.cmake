# The MPICH build's multi-rank tests (label mpich), run by scripts/test.sh in
# build-mpich/: a subset of the Open MPI build's suites, the same programs and
# settings under MPICH's Hydra, libslimreduce-mpich.so preloaded. What does
# not depend on the MPI family (unit tests, the host simulation, the tools)
# runs in the Open MPI build only. Included by tests/mpi/CMakeLists.txt.
if(NOT MPIEXEC_EXECUTABLE)
  message(WARNING "SlimReduce: no MPICH launcher (mpiexec.mpich) found: the mpich tests are "
                  "not registered (Debian: apt-get install mpich)")
  return()
endif()

# Dense casts: pass-through exact (none), fp16 and bf16 at several rank counts, error feedback.
add_preloaded_gtest(test_mpi_dense)
add_mpi_test(mpich_dense_none_np2 2 test_mpi_dense
             ENV SLIMREDUCE_COMPRESSOR=none SLIMREDUCE_MIN_BYTES=4096
             ARGS --gtest_filter=-ErrorFeedback.*)
foreach(ranks 2 3 4)
  add_mpi_test(mpich_dense_fp16_np${ranks} ${ranks} test_mpi_dense
               ENV SLIMREDUCE_COMPRESSOR=fp16 SLIMREDUCE_MIN_BYTES=4
               ARGS --gtest_filter=-ErrorFeedback.*)
endforeach()
add_mpi_test(mpich_dense_bf16_np3 3 test_mpi_dense
             ENV SLIMREDUCE_COMPRESSOR=bf16 SLIMREDUCE_MIN_BYTES=4096
             ARGS --gtest_filter=-ErrorFeedback.*)
add_mpi_test(mpich_error_feedback_fp16_np3 3 test_mpi_dense
             ENV SLIMREDUCE_COMPRESSOR=fp16 SLIMREDUCE_MIN_BYTES=4096 SLIMREDUCE_ERROR_FEEDBACK=1
             ARGS --gtest_filter=ErrorFeedback.*)

# Top-k, gathered: references from every rank, bit-exact, call after call.
add_preloaded_gtest(test_mpi_topk)
foreach(ranks 3 4)
  add_mpi_test(mpich_topk_np${ranks} ${ranks} test_mpi_topk ENV SLIMREDUCE_COMPRESSOR=topk)
endforeach()

# int8 (and the other compressors) on the edge inputs: count 0, zeros, subnormals, one element.
add_preloaded_gtest(test_mpi_edge_inputs)
foreach(compressor int8 powersgd)
  add_mpi_test(mpich_edge_inputs_${compressor}_np3 3 test_mpi_edge_inputs
               ENV SLIMREDUCE_COMPRESSOR=${compressor} SLIMREDUCE_MIN_BYTES=4)
endforeach()
add_mpi_test(mpich_edge_inputs_int8_minmax_np3 3 test_mpi_edge_inputs
             ENV SLIMREDUCE_COMPRESSOR=int8 SLIMREDUCE_QUANT_CODES=minmax SLIMREDUCE_MIN_BYTES=4)
# The fewer bits: int4 and int2 (min-max codes), fp8, and stochastic rounding
# under the preload (the runtime numbers each shape's calls by communicator).
foreach(compressor int4 int2 fp8)
  add_mpi_test(mpich_edge_inputs_${compressor}_np3 3 test_mpi_edge_inputs
               ENV SLIMREDUCE_COMPRESSOR=${compressor} SLIMREDUCE_MIN_BYTES=4)
endforeach()
add_mpi_test(mpich_edge_inputs_int4_stochastic_np3 3 test_mpi_edge_inputs
             ENV SLIMREDUCE_COMPRESSOR=int4 SLIMREDUCE_QUANT_ROUNDING=stochastic
             SLIMREDUCE_QUANT_SEED=11 SLIMREDUCE_MIN_BYTES=4)

# Stochastic rounding through the sharded algorithm over MPICH (linked, no
# preload): alike on every rank, reproducible, unbiased without error feedback.
# Two ranks, one a core: MPICH's ranks poll without yielding, so with 3 ranks
# on this 2-core machine each exchange waits out a scheduler slice (the 18
# cases took 17 s alone, 42 s beside another test; at 2 ranks 0.1 s). Three
# and four ranks run in the Open MPI build (mpi_stochastic_np3, _np4).
add_executable(test_mpi_stochastic test_mpi_stochastic.cc)
target_include_directories(test_mpi_stochastic PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(test_mpi_stochastic PRIVATE slimreduce_internal GTest::gtest ${CMAKE_DL_LIBS})
add_test(NAME mpich_stochastic_np2 COMMAND ${SLIMREDUCE_MPIRUN} -np 2
                                           $<TARGET_FILE:test_mpi_stochastic>)
set_tests_properties(mpich_stochastic_np2 PROPERTIES TIMEOUT 300 LABELS mpich)

# Hierarchical reduction over the sub-communicators MPICH splits (2 emulated
# nodes of 2), fp16: what depends on the MPI family is the split, which every
# compressor shares (the other compressors run hierarchically in the Open MPI build).
add_preloaded_gtest(test_mpi_hierarchical)
add_mpi_test(mpich_hierarchical_fp16_np4_l2 4 test_mpi_hierarchical
             ENV SLIMREDUCE_COMPRESSOR=fp16 SLIMREDUCE_MIN_BYTES=4 SLIMREDUCE_HIERARCHICAL=1
                 SLIMREDUCE_LOCAL_SIZE=2
             ARGS --gtest_filter=-Hierarchical.ErrorFeedback*)

# PowerSGD through core's host_allreduce over MPICH (linked, no preload):
# recovery, bits on every rank, the residual, warm start, inf and NaN.
add_executable(test_mpi_powersgd test_mpi_powersgd.cc)
target_include_directories(test_mpi_powersgd PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(test_mpi_powersgd PRIVATE slimreduce_internal GTest::gtest ${CMAKE_DL_LIBS})
add_test(NAME mpich_powersgd_np3 COMMAND ${SLIMREDUCE_MPIRUN} -np 3 $<TARGET_FILE:test_mpi_powersgd>)
set_tests_properties(mpich_powersgd_np3 PROPERTIES TIMEOUT 300 LABELS mpich)

# SLIMREDUCE_COMPRESSOR=auto: the same candidate on every rank at every call,
# probes in turn, each call with its candidate's bits; and over 2 emulated
# nodes, flat or two-level chosen with it (SLIMREDUCE_HIERARCHICAL=auto).
add_preloaded_gtest(test_mpi_auto)
add_mpi_test(mpich_auto_np2 2 test_mpi_auto ENV SLIMREDUCE_COMPRESSOR=auto
             ARGS --gtest_filter=-Auto.NoneSends*)
add_mpi_test(mpich_auto_two_level_choice_np4 4 test_mpi_auto
             ENV SLIMREDUCE_COMPRESSOR=auto SLIMREDUCE_HIERARCHICAL=auto SLIMREDUCE_LOCAL_SIZE=2
             ARGS --gtest_filter=-Auto.NoneSends*)

# MPI_Iallreduce queued and fused (generalized requests, every wait and test).
add_preloaded_gtest(test_mpi_iallreduce)
foreach(compressor fp16 topk)
  add_mpi_test(mpich_iallreduce_${compressor}_np2 2 test_mpi_iallreduce
               ENV SLIMREDUCE_COMPRESSOR=${compressor} SLIMREDUCE_MIN_BYTES=4096
                   SLIMREDUCE_ERROR_FEEDBACK=1 SLIMREDUCE_TOPK_RATIO=1
               ARGS --gtest_filter=-Priority.*)
endforeach()
add_mpi_test(mpich_iallreduce_bf16_partitions_np3 3 test_mpi_iallreduce
             ENV SLIMREDUCE_COMPRESSOR=bf16 SLIMREDUCE_MIN_BYTES=4096
                 SLIMREDUCE_FUSION_THRESHOLD=1048576 SLIMREDUCE_PARTITION_BYTES=65536
             ARGS --gtest_filter=-Priority.*)

# Whole jobs, unmodified, their reports checked against their known traffic:
# C, and Fortran through MPICH's own bindings (`use mpi` and `use mpi_f08`,
# MPI_IN_PLACE among the calls), which reach the C shims.
add_executable(report_job report_job.c)
target_link_libraries(report_job PRIVATE MPI::MPI_C)
foreach(compressor none fp16)
  add_job_test(mpich_job_c_report_${compressor}_np3 report 3 c PROGRAM $<TARGET_FILE:report_job>
               OPTIONS --compressor ${compressor})
endforeach()
add_job_test(mpich_job_bad_setting_compressor badenv 2 c PROGRAM $<TARGET_FILE:report_job>
             OPTIONS --setting SLIMREDUCE_COMPRESSOR=fp17
                     --expect "SLIMREDUCE_COMPRESSOR='fp17' is not accepted")
# The demo's training job (examples/train_mlp) under MPICH, preloaded: each
# compressor's final loss against the uncompressed one (the bounds of
# job_convergence_np4), and PowerSGD's by check_powersgd_job.py (the loss, the
# queued run's, each rank's bytes by hand). Two ranks, one a core: at 4 a
# 300-step run took 25 s here against 3 s (MPICH's ranks poll without yielding).
add_test(NAME mpich_job_convergence_np2
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/check_convergence.py
                 --lib $<TARGET_FILE:slimreduce> --train $<TARGET_FILE:train_mlp> --np 2
                 --steps 300 --mpi mpich --case fp16:1 --case int8:1 --case topk:0.01:3
                 -- ${SLIMREDUCE_MPIRUN})
add_test(NAME mpich_job_powersgd_np2
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/check_powersgd_job.py
                 --lib $<TARGET_FILE:slimreduce> --train $<TARGET_FILE:train_mlp> --np 2
                 --steps 300 --rank 4 --bound 3 --mpi mpich -- ${SLIMREDUCE_MPIRUN})
# Alone (PROCESSORS 2): beside another test they took 35 s and 27 s in a
# fresh clone, against 11 s and 9 s alone.
set_tests_properties(mpich_job_convergence_np2 mpich_job_powersgd_np2
                     PROPERTIES TIMEOUT 300 LABELS mpich PROCESSORS 2)

# The one line on UCX's rendezvous (core/mpi/ucx_advice.h): where UCX speaks
# TCP between the ranks (UCX_TLS=tcp,self, as on the emulated link) and the
# user chose no rendezvous; not with one chosen, not over shared memory, not
# while nothing is compressed.
add_job_test(mpich_ucx_advice_tcp_np2 advice 2 c PROGRAM $<TARGET_FILE:report_job>
             OPTIONS --compressor fp16 --env UCX_TLS=tcp,self --advised)
add_job_test(mpich_ucx_advice_chosen_np2 advice 2 c PROGRAM $<TARGET_FILE:report_job>
             OPTIONS --compressor fp16 --env UCX_TLS=tcp,self --env UCX_TCP_PUT_ENABLE=n)
add_job_test(mpich_ucx_advice_shared_memory_np2 advice 2 c PROGRAM $<TARGET_FILE:report_job>
             OPTIONS --compressor fp16)
add_job_test(mpich_ucx_advice_uncompressed_np2 advice 2 c PROGRAM $<TARGET_FILE:report_job>
             OPTIONS --compressor none --env UCX_TLS=tcp,self)
if(SLIMREDUCE_HAVE_FORTRAN)
  add_executable(fortran_job fortran_job.F90)
  target_link_libraries(fortran_job PRIVATE MPI::MPI_Fortran)
  add_job_test(mpich_job_fortran_report_fp16_np3 report 3 fortran
               PROGRAM $<TARGET_FILE:fortran_job> OPTIONS --compressor fp16)
  add_executable(fortran_f08_job fortran_job.F90)
  target_compile_definitions(fortran_f08_job PRIVATE SLIMREDUCE_F08)
  target_link_libraries(fortran_f08_job PRIVATE MPI::MPI_Fortran)
  add_job_test(mpich_job_fortran_f08_report_bf16_np3 report 3 fortran
               PROGRAM $<TARGET_FILE:fortran_f08_job> OPTIONS --compressor bf16)
endif()

# Python through mpi4py built against MPICH (Debian's python3-mpi4py is Open
# MPI's): a venv in this tree, made by mpich_python.sh, which builds mpi4py's
# wheel once per machine (about 4 CPU-minutes) and installs from it after (about
# 11 s). Its jobs run at 2 ranks, one a core (MPICH's ranks poll without yielding).
set(mpich_python ${CMAKE_BINARY_DIR}/mpich-python/bin/python)
add_test(NAME mpich_python_venv
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/mpich_python.sh ${CMAKE_BINARY_DIR}/mpich-python)
set_tests_properties(mpich_python_venv PROPERTIES LABELS mpich TIMEOUT 1200 SKIP_RETURN_CODE 77
                                                  FIXTURES_SETUP mpich_python)
# Where the venv could not be made (no PyPI: the fixture skipped), they skip too.
set(skip_without ${CMAKE_CURRENT_SOURCE_DIR}/skip_without.sh ${mpich_python})
add_test(NAME mpich_job_python_report_bf16_np2
         COMMAND ${skip_without} ${CHECK_JOB} report --lib $<TARGET_FILE:slimreduce> --np 2
                 --job python --mpi mpich --compressor bf16 -- ${SLIMREDUCE_MPIRUN} -np 2
                 --program ${mpich_python} ${CMAKE_CURRENT_SOURCE_DIR}/mpi4py_job.py)
# mpi4py's Iallreduce and Request.Waitall / Testall reach the same shims.
slimreduce_mpi_launch(launch RANKS 2 ENV LD_PRELOAD=$<TARGET_FILE:slimreduce>
                      SLIMREDUCE_COMPRESSOR=fp16)
add_test(NAME mpich_python_iallreduce_fp16_np2
         COMMAND ${skip_without} ${launch} ${mpich_python}
                 ${CMAKE_CURRENT_SOURCE_DIR}/mpi4py_iallreduce_job.py)
# A numpy job's own matrix products keep their bits and their BLAS (pip's numpy
# brings its own OpenBLAS) under the preload, with PowerSGD's products on
# SlimReduce's private copy of Debian's OpenBLAS (loaded with dlmopen).
add_test(NAME mpich_job_numpy_blas_powersgd_np2
         COMMAND ${skip_without} ${Python3_EXECUTABLE}
                 ${CMAKE_CURRENT_SOURCE_DIR}/check_numpy_blas.py --lib $<TARGET_FILE:slimreduce>
                 --job ${CMAKE_CURRENT_SOURCE_DIR}/numpy_blas_job.py --np 2 --mpi mpich
                 --python ${mpich_python} -- ${SLIMREDUCE_MPIRUN})
set_tests_properties(mpich_job_python_report_bf16_np2 mpich_python_iallreduce_fp16_np2
                     mpich_job_numpy_blas_powersgd_np2
                     PROPERTIES LABELS mpich TIMEOUT 300 SKIP_RETURN_CODE 77
                                FIXTURES_REQUIRED mpich_python)

# The same library and programs under Intel MPI (impi-rt from PyPI).
include(${CMAKE_CURRENT_SOURCE_DIR}/intel_mpi.cmake)

# MPI-4's large-count allreduces (tests/mpi/large_count_calls_job.c): taken as
# MPI_Allreduce's where the count fits an int, untouched past INT_MAX.
if(SLIMREDUCE_MPI_LARGE_COUNT)
  add_executable(large_count_calls_job large_count_calls_job.c)
  target_include_directories(large_count_calls_job PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(large_count_calls_job PRIVATE MPI::MPI_C ${CMAKE_DL_LIBS})
  add_mpi_test(mpich_large_count_calls_fp16_np2 2 large_count_calls_job
               ENV SLIMREDUCE_COMPRESSOR=fp16)
endif()

# Errors reach the communicator's error handler, with MPICH's error classes
# and its string for MPI_ERR_NO_MEM in our line (tests/mpi/errors.cmake).
include(${CMAKE_CURRENT_SOURCE_DIR}/errors.cmake)
add_error_handler_tests(mpich_errors "Unable to allocate memory")

# A rank that dies inside a compressed call: the job ends with Hydra's error
# (tests/mpi/dead_rank.cmake; check_dead_rank.sh states what Hydra reports).
include(${CMAKE_CURRENT_SOURCE_DIR}/dead_rank.cmake)
add_dead_rank_tests(mpich_dead_rank "none blocking abort 2" "fp16 queued abort 2"
  "topk_sharded queued abort 4" "fp16_pipelined blocking exit 3" "topk queued exit 2")

# The library exports only its entry points (no Open MPI Fortran names here).
add_test(NAME mpich_library_exports_only_entry_points
         COMMAND ${PROJECT_SOURCE_DIR}/tests/check_exports.sh $<TARGET_FILE:slimreduce> --no-fortran)
set_tests_properties(mpich_library_exports_only_entry_points PROPERTIES LABELS mpich)

# The MPICH build preloaded into an Open MPI job: refused with one line,
# before any collective (a C job, and mpi4py, which loads its MPI privately).
find_program(SLIMREDUCE_OPENMPI_MPIRUN mpirun.openmpi)
find_program(SLIMREDUCE_OPENMPI_MPICC mpicc.openmpi)
if(SLIMREDUCE_OPENMPI_MPIRUN AND SLIMREDUCE_OPENMPI_MPICC)
  set(check_wrong_abi ${CMAKE_CURRENT_SOURCE_DIR}/check_wrong_abi.sh $<TARGET_FILE:slimreduce>
      openmpi ${SLIMREDUCE_OPENMPI_MPIRUN})
  add_test(NAME mpich_library_refused_by_openmpi_job
           COMMAND ${check_wrong_abi} compile:${SLIMREDUCE_OPENMPI_MPICC})
  add_test(NAME mpich_library_refused_by_openmpi_mpi4py
           COMMAND ${check_wrong_abi} /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/mpi4py_job.py)
  set_tests_properties(mpich_library_refused_by_openmpi_job mpich_library_refused_by_openmpi_mpi4py
                       PROPERTIES LABELS mpich TIMEOUT 120)
endif()
