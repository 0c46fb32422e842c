# examples/multihost_convert: host-local <-> global arrays, checked against an awk reference
# and the values of the JAX docstring (check_multihost_convert.sh).
add_test(NAME example_multihost_convert_1x8
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/check_multihost_convert.sh 1 8
                 $<TARGET_FILE:multihost_convert>)
set_tests_properties(example_multihost_convert_1x8 PROPERTIES LABELS "examples" TIMEOUT 120
                     ENVIRONMENT "${SPMD_TEST_ENV}")
if(SPMD_HAVE_MPI)
  foreach(layout 4x2 2x4)
    string(REPLACE "x" ";" pd ${layout})
    list(GET pd 0 procs)
    list(GET pd 1 per)
    add_test(NAME example_multihost_convert_${layout}
             COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/check_multihost_convert.sh ${procs} ${per}
                     $<TARGET_FILE:multihost_convert> ${MPIEXEC_EXECUTABLE})
    set_tests_properties(example_multihost_convert_${layout} PROPERTIES LABELS "examples;mpi"
                         TIMEOUT 120 ENVIRONMENT "${SPMD_MPI_TEST_ENV}")
  endforeach()
endif()
