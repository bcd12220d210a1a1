# What `cmake --install` adds for users of the library (docs/tools.md):
#  - lib/cmake/SlimReduce/SlimReduceConfig.cmake and its version file
#    (find_package(SlimReduce): imported targets for the C API);
#    the same file from either MPI build: it finds what the library folder
#    holds (libslimreduce.so, libslimreduce-mpich.so, libslimreduce_nccl.so);
#  - lib/pkgconfig/slimreduce.pc (pkg-config --cflags --libs slimreduce), or
#    slimreduce-mpich.pc from the MPICH build, named as its library is and
#    installed with it (component mpich);
#  - bin/slimreduce-run and bin/slimreduce-report, with their Python package
#    in share/slimreduce/python (a pip install makes them console scripts instead).
# The libraries and the header are installed where interpose/ says: lib, include.
include(CMakePackageConfigHelpers)
set(SLIMREDUCE_INSTALL_LIBDIR lib)
set(SLIMREDUCE_INSTALL_INCLUDEDIR include)
set(SLIMREDUCE_INSTALL_CMAKEDIR ${SLIMREDUCE_INSTALL_LIBDIR}/cmake/SlimReduce)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/SlimReduceConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/SlimReduceConfig.cmake
                              INSTALL_DESTINATION ${SLIMREDUCE_INSTALL_CMAKEDIR})
# 0.x: a new minor version may change the C API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/SlimReduceConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/SlimReduceConfig.cmake
              ${PROJECT_BINARY_DIR}/SlimReduceConfigVersion.cmake
        DESTINATION ${SLIMREDUCE_INSTALL_CMAKEDIR})
if(SLIMREDUCE_MPI)
  if(SLIMREDUCE_MPI_ABI_BUILT STREQUAL "mpich")
    set(SLIMREDUCE_PC_ABI "the MPICH family's ABI: MPICH, Intel MPI, MVAPICH, Cray MPICH")
    set(_sr_pc_component mpich)  # beside an Open MPI tree, with its library
  else()
    set(SLIMREDUCE_PC_ABI "Open MPI's ABI")
    set(_sr_pc_component Unspecified)
  endif()
  configure_file(${PROJECT_SOURCE_DIR}/cmake/slimreduce.pc.in
                 ${PROJECT_BINARY_DIR}/${SLIMREDUCE_MPI_LIBRARY_NAME}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/${SLIMREDUCE_MPI_LIBRARY_NAME}.pc
          DESTINATION ${SLIMREDUCE_INSTALL_LIBDIR}/pkgconfig COMPONENT ${_sr_pc_component})
endif()

# The tools. Under pip (scikit-build-core sets SKBUILD), the wheel carries the
# package and makes the console scripts itself.
if(NOT SKBUILD)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/slimreduce DESTINATION share/slimreduce/python
          FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
  install(PROGRAMS ${PROJECT_SOURCE_DIR}/python/bin/slimreduce-run
                   ${PROJECT_SOURCE_DIR}/python/bin/slimreduce-report
          DESTINATION bin)
endif()
