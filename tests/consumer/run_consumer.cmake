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
# The consumer compiles as this build did (a sanitizer build's libraries need
# the sanitizer at link time too).
step(${CMAKE_COMMAND} -S "${PROJECT_DIR}" -B "${WORK_DIR}/build" -G "${GENERATOR}"
     "-DCMAKE_PREFIX_PATH=${prefix}" -DCMAKE_BUILD_TYPE=Release
     "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${LINKER_FLAGS}")
step(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
step("${WORK_DIR}/build/consumer" "${REPORT}")
message("${step_output}")
file(REMOVE_RECURSE "${WORK_DIR}")
