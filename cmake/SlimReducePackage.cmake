# What `cmake --install` adds for users of the library (docs/tools.md):
#  - lib/cmake/SlimReduce/SlimReduceConfig.cmake and its version file
#    (find_package(SlimReduce): imported targets for the C API);
#  - lib/pkgconfig/slimreduce.pc (pkg-config --cflags --libs slimreduce);
#  - bin/slimreduce-run and bin/slimreduce-report, with their Python package
#    in share/slimreduce/python (a pip install makes them console scripts instead).
# The libraries and the header are installed where interpose/ says: lib, include.
include(CMakePackageConfigHelpers)
set(SLIMREDUCE_INSTALL_LIBDIR lib)
set(SLIMREDUCE_INSTALL_INCLUDEDIR include)
set(SLIMREDUCE_INSTALL_CMAKEDIR ${SLIMREDUCE_INSTALL_LIBDIR}/cmake/SlimReduce)

# Plain ON/OFF for the config file's if()s.
if(SLIMREDUCE_MPI)
  set(SLIMREDUCE_MPI ON)
else()
  set(SLIMREDUCE_MPI OFF)
endif()
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
  configure_file(${PROJECT_SOURCE_DIR}/cmake/slimreduce.pc.in ${PROJECT_BINARY_DIR}/slimreduce.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/slimreduce.pc DESTINATION ${SLIMREDUCE_INSTALL_LIBDIR}/pkgconfig)
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
