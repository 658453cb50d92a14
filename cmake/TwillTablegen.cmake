# twill_tablegen(OUTPUT GENERATOR): runs twill-tblgen -GENERATOR over the
# twill dialect's ODS into OUTPUT (relative to the build root, where
# includes find it as from the source root). LLVM's tablegen() is not
# there in the runtime-only and fuzz builds, so this is a plain command.
set(TWILL_ODS_ROOT ${PROJECT_SOURCE_DIR}/dialects/twill/TwillOps.td)
file(GLOB TWILL_ODS_FILES CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/dialects/twill/*.td)
if(MLIR_INCLUDE_DIRS)
  set(TWILL_ODS_INCLUDES ${MLIR_INCLUDE_DIRS})
else()
  # Debian's MLIR headers and .td files sit beside LLVM's.
  set(TWILL_ODS_INCLUDES ${LLVM_INCLUDE_DIRS})
endif()

function(twill_tablegen output generator)
  set(out ${PROJECT_BINARY_DIR}/${output})
  set(includes)
  foreach(dir ${TWILL_ODS_INCLUDES})
    list(APPEND includes -I ${dir})
  endforeach()
  add_custom_command(
    OUTPUT ${out}
    COMMAND twill-tblgen -${generator} -I ${PROJECT_SOURCE_DIR} ${includes}
            ${TWILL_ODS_ROOT} -o ${out}
    DEPENDS twill-tblgen ${TWILL_ODS_FILES}
    COMMENT "twill-tblgen -${generator}: ${output}")
endfunction()
