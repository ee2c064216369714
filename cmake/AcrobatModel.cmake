# acrobat_add_model(<target> <model.acr> [SET NAME=VALUE ...] [DISABLE analysis ...])
#
# Compiles a model ahead of time at build time with `acrobat compile` (the same generated C++ and the
# same content-addressed cache as `acrobat run --engine aot`) into <target>.so in the current binary
# directory, and adds the target <target> that builds it. The object's path is the target property
# ACROBAT_OBJECT, for programs that load it with acrobat::AotEngine (AotOptions::object); they must
# compile the module with the same dims and analyses.
function(acrobat_add_model target model)
  cmake_parse_arguments(ARG "" "" "SET;DISABLE" ${ARGN})
  get_filename_component(model_path "${model}" ABSOLUTE)
  set(object "${CMAKE_CURRENT_BINARY_DIR}/${target}.so")
  set(options)
  foreach(s IN LISTS ARG_SET)
    list(APPEND options --set "${s}")
  endforeach()
  if(ARG_DISABLE)
    list(JOIN ARG_DISABLE "," disabled)
    list(APPEND options --disable "${disabled}")
  endif()
  add_custom_command(
    OUTPUT "${object}"
    COMMAND acrobat compile "${model_path}" -o "${object}" --cache-dir "${CMAKE_BINARY_DIR}/aot-cache"
            ${options}
    DEPENDS acrobat "${model_path}" "${PROJECT_SOURCE_DIR}/include/acrobat/aot.h"
            "${PROJECT_SOURCE_DIR}/src/kernels/simd.h" "${PROJECT_SOURCE_DIR}/src/kernels/vec_math.h"
    COMMENT "Compiling model ${model} ahead of time"
    VERBATIM)
  add_custom_target(${target} ALL DEPENDS "${object}")
  set_target_properties(${target} PROPERTIES ACROBAT_OBJECT "${object}")
endfunction()
