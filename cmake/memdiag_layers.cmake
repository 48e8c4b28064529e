# Helpers for memdiag's layered targets.

# Warnings apply to our code only; dependency headers come in as SYSTEM
# includes through their imported targets, so they stay quiet.
add_library(memdiag_warnings INTERFACE)
add_library(memdiag::warnings ALIAS memdiag_warnings)
# -Werror=switch always: every switch over a closed set names every value
# (no default), so a value added to an enum fails the build until each
# switch handles it (tests/layering/ proves it for Cause and RemedyKind).
target_compile_options(memdiag_warnings INTERFACE -Wall -Wextra -Wshadow -Wnon-virtual-dtor -Wpedantic -Werror=switch)
if(MEMDIAG_WARNINGS_AS_ERRORS)
  target_compile_options(memdiag_warnings INTERFACE -Werror)
endif()

# memdiag_layer(NAME SOURCES ... [PUBLIC_LINKS ...] [PRIVATE_LINKS ...])
# A static library memdiag_NAME (alias memdiag::NAME, exported as
# memdiag::NAME) whose public headers are include/NAME/memdiag/*.hpp and
# whose sources may also include their own directory's internal headers.
function(memdiag_layer name)
  cmake_parse_arguments(L "" "" "SOURCES;PUBLIC_LINKS;PRIVATE_LINKS" ${ARGN})
  add_library(memdiag_${name} STATIC ${L_SOURCES})
  add_library(memdiag::${name} ALIAS memdiag_${name})
  set_target_properties(memdiag_${name} PROPERTIES EXPORT_NAME ${name})
  target_include_directories(memdiag_${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include/${name}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(memdiag_${name} PUBLIC ${L_PUBLIC_LINKS} PRIVATE ${L_PRIVATE_LINKS} $<BUILD_INTERFACE:memdiag::warnings>)
endfunction()

# The LibTorch headers memdiag's torch translation units use, compiled once
# per target instead of once per file: a clean build parses them a handful of
# times instead of about twenty.
set(MEMDIAG_TORCH_PCH
  <torch/nn/modules/container/sequential.h>
  <torch/nn/modules/linear.h>
  <torch/nn/modules/activation.h>
  <torch/nn/functional/loss.h>
  <torch/optim/adam.h>
  <torch/optim/adamw.h>
  <torch/optim/sgd.h>
  <ATen/core/Tensor.h>
  <c10/core/Device.h>
  <string>
  <vector>)

# memdiag_precompile(TARGET HEADER... [SKIP SOURCE...]) or
# memdiag_precompile(TARGET REUSE_FROM OTHER): a precompiled header for
# TARGET, or OTHER's (whose compile flags TARGET must share).
function(memdiag_precompile target)
  if(NOT MEMDIAG_PRECOMPILED_HEADERS)
    return()
  endif()
  cmake_parse_arguments(P "" "REUSE_FROM" "SKIP" ${ARGN})
  if(P_REUSE_FROM)
    target_precompile_headers(${target} REUSE_FROM ${P_REUSE_FROM})
  else()
    target_precompile_headers(${target} PRIVATE ${P_UNPARSED_ARGUMENTS})
    if(P_SKIP)
      set_source_files_properties(${P_SKIP} TARGET_DIRECTORY ${target} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
    endif()
  endif()
endfunction()

# memdiag_torch makes the precompiled header; the other torch targets (tests,
# example) reuse it, which needs their compile flags to equal its: no -D of
# their own (paths come through generated headers), same warnings.
function(memdiag_precompile_torch target)
  if(NOT MEMDIAG_PRECOMPILED_HEADERS)
    return()
  endif()
  if(target STREQUAL "memdiag_torch_objects")
    target_precompile_headers(memdiag_torch_objects PRIVATE ${MEMDIAG_TORCH_PCH})
  else()
    target_precompile_headers(${target} REUSE_FROM memdiag_torch_objects)
  endif()
endfunction()
