# cmake -DBUILD_DIR=... -DPROJECT_DIR=... -DWORK_DIR=... -DREPORT=... -P run_consumer.cmake
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")

function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer: '${ARGN}' failed (${rc}):\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

# Only the torch-free components: the consumer reads and analyses reports.
step(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
# The version it asks for: this tree's major.minor (the VERSION file), as a
# user's project names the release it was written against.
file(STRINGS "${PROJECT_DIR}/../../../VERSION" version LIMIT_COUNT 1)
string(REGEX MATCH "^[0-9]+\\.[0-9]+" version "${version}")
# The consumer compiles as this build did (a sanitizer build's libraries need
# the sanitizer at link time too).
step(${CMAKE_COMMAND} -S "${PROJECT_DIR}" -B "${WORK_DIR}/build" -G "${GENERATOR}"
     "-DCMAKE_PREFIX_PATH=${prefix}" -DCMAKE_BUILD_TYPE=Release "-DMEMDIAG_REQUIRED_VERSION=${version}"
     "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${LINKER_FLAGS}")
step(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
step("${WORK_DIR}/build/consumer" "${REPORT}")
set(consumer_output "${step_output}")
# The installed tools run from the prefix as a user would call them: the
# comparer reads the report, and memory_diagnostics (where LibTorch was built)
# finds LibTorch through its RUNPATH and its cases under share/memdiag.
step("${prefix}/bin/compare_memory_reports" "${REPORT}")
if(EXISTS "${prefix}/bin/memory_diagnostics")
  step("${prefix}/bin/memory_diagnostics" --list-cases)
  if(NOT step_output MATCHES "share/memdiag/cases/alpha.json")
    message(FATAL_ERROR "consumer: the installed memory_diagnostics lists no installed cases:\n${step_output}")
  endif()
  step("${prefix}/bin/memory_diagnostics" --case alpha --steps 1 --batch-size-per-device 2 --device cpu --quiet
       -o "${WORK_DIR}/installed-run/alpha.json")
  step("${prefix}/bin/compare_memory_reports" "${WORK_DIR}/installed-run/alpha.json")
endif()
message("${consumer_output}")
file(REMOVE_RECURSE "${WORK_DIR}")
