# examples/unreplicate: the anti-pattern and the fix of unreplicate, checked against
# an awk reference (check_unreplicate.sh).
add_test(NAME example_unreplicate_1x8
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/check_unreplicate.sh 1 8
                 $<TARGET_FILE:unreplicate>)
set_tests_properties(example_unreplicate_1x8 PROPERTIES LABELS "examples" TIMEOUT 120
                     ENVIRONMENT "${SPMD_TEST_ENV}")
if(SPMD_HAVE_MPI)
  foreach(layout 4x2 2x4)
    string(REPLACE "x" ";" pd ${layout})
    list(GET pd 0 procs)
    list(GET pd 1 per)
    add_test(NAME example_unreplicate_${layout}
             COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/check_unreplicate.sh ${procs} ${per}
                     $<TARGET_FILE:unreplicate> ${MPIEXEC_EXECUTABLE})
    set_tests_properties(example_unreplicate_${layout} PROPERTIES LABELS "examples;mpi"
                         TIMEOUT 120 ENVIRONMENT "${SPMD_MPI_TEST_ENV}")
  endforeach()
endif()
