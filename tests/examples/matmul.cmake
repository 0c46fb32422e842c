# examples/matmul: relu(x @ y) of the multi-controller guide, checked by check_matmul.sh.
add_test(NAME example_matmul_1x8
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/check_matmul.sh 1 8 $<TARGET_FILE:matmul>)
set_tests_properties(example_matmul_1x8 PROPERTIES LABELS "examples" TIMEOUT 120
                     ENVIRONMENT "${SPMD_TEST_ENV}")
if(SPMD_HAVE_MPI)
  foreach(layout 4x2 2x4)
    string(REPLACE "x" ";" counts ${layout})
    list(GET counts 0 procs)
    list(GET counts 1 per)
    add_test(NAME example_matmul_${layout}
             COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/check_matmul.sh ${procs} ${per}
                     $<TARGET_FILE:matmul> ${MPIEXEC_EXECUTABLE})
    set_tests_properties(example_matmul_${layout} PROPERTIES LABELS "examples;mpi" TIMEOUT 120
                         ENVIRONMENT "${SPMD_MPI_TEST_ENV}")
  endforeach()
endif()
