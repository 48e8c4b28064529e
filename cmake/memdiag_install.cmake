# Install rules and the exported CMake package:
#   find_package(memdiag)                     memdiag::core, ::analysis, ::render, ::run (no LibTorch)
#   find_package(memdiag COMPONENTS torch)    memdiag::torch too (needs Torch)
include(CMakePackageConfigHelpers)

set(MEMDIAG_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/memdiag)

# pip install . (scikit-build-core, pyproject.toml): the wheel carries the
# Python recorder and this comparer, built without LibTorch, into the
# environment's bin; only the "python" component is installed there.
if(SKBUILD)
  install(TARGETS compare_memory_reports RUNTIME DESTINATION ${SKBUILD_SCRIPTS_DIR} COMPONENT python)
endif()

install(TARGETS memdiag_core memdiag_analysis memdiag_render memdiag_run EXPORT memdiagTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/core/ include/analysis/ include/render/ include/run/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT memdiagTargets NAMESPACE memdiag:: DESTINATION ${MEMDIAG_CMAKE_DIR})
install(TARGETS compare_memory_reports RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY schema/ DESTINATION ${CMAKE_INSTALL_DATADIR}/memdiag/schema)

if(MEMDIAG_WITH_TORCH)
  install(TARGETS memdiag_torch EXPORT memdiagTorchTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(DIRECTORY include/torch/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT memdiagTorchTargets NAMESPACE memdiag:: DESTINATION ${MEMDIAG_CMAKE_DIR})
  # The built-in cases, where memory_diagnostics looks for them beside itself.
  # LibTorch is not on the loader's path (it lives in a Python environment):
  # the installed runner keeps the directories it was linked against as
  # its RUNPATH, where the build tree's copy had them as a build RPATH.
  set_target_properties(${_memdiag_runners} PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
  install(TARGETS memory_diagnostics RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  # Where the front looks for them (src/cli/install_layout.hpp): fixed, not
  # CMAKE_INSTALL_LIBEXECDIR, which a packager may move.
  install(TARGETS ${_memdiag_runners} RUNTIME DESTINATION libexec/memdiag)
  install(DIRECTORY cases/ DESTINATION ${CMAKE_INSTALL_DATADIR}/memdiag/cases FILES_MATCHING PATTERN "*.json")
endif()

configure_package_config_file(cmake/memdiagConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/memdiagConfig.cmake
  INSTALL_DESTINATION ${MEMDIAG_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/memdiagConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/memdiagConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/memdiagConfigVersion.cmake
  DESTINATION ${MEMDIAG_CMAKE_DIR})
