# examples/data_parallel_mlp: pmap and shard_map training steps, checked against each other and
# against a plain host reference (mlp_reference.c: full-batch SGD in double, no libspmd).
add_executable(mlp_reference ${CMAKE_CURRENT_LIST_DIR}/mlp_reference.c)
target_compile_options(mlp_reference PRIVATE ${SPMD_WARNINGS})
if(NOT WIN32)
  target_link_libraries(mlp_reference PRIVATE m) # fabs
endif()

set(_mlp_check ${CMAKE_CURRENT_LIST_DIR}/check_data_parallel_mlp.sh)
add_test(NAME example_data_parallel_mlp_1x8
         COMMAND sh ${_mlp_check} 1 8 $<TARGET_FILE:data_parallel_mlp>
                 $<TARGET_FILE:mlp_reference>)
set_tests_properties(example_data_parallel_mlp_1x8 PROPERTIES LABELS "examples" TIMEOUT 120
                     ENVIRONMENT "${SPMD_TEST_ENV}")
if(SPMD_HAVE_MPI)
  foreach(_layout 4x2 2x4)
    string(REPLACE "x" ";" _pd ${_layout})
    list(GET _pd 0 _procs)
    list(GET _pd 1 _per)
    add_test(NAME example_data_parallel_mlp_${_layout}
             COMMAND sh ${_mlp_check} ${_procs} ${_per} $<TARGET_FILE:data_parallel_mlp>
                     $<TARGET_FILE:mlp_reference> ${MPIEXEC_EXECUTABLE})
    set_tests_properties(example_data_parallel_mlp_${_layout} PROPERTIES LABELS "examples;mpi"
                         TIMEOUT 120 ENVIRONMENT "${SPMD_MPI_TEST_ENV}")
  endforeach()
endif()
