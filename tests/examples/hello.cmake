add_test(NAME example_hello_1x8
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/check_hello.sh 1 8 $<TARGET_FILE:hello>)
set_tests_properties(example_hello_1x8 PROPERTIES LABELS "examples" TIMEOUT 120
                     ENVIRONMENT "${SPMD_TEST_ENV}")
if(SPMD_HAVE_MPI)
  add_test(NAME example_hello_4x2
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/check_hello.sh 4 2 $<TARGET_FILE:hello>
                   ${MPIEXEC_EXECUTABLE})
  set_tests_properties(example_hello_4x2 PROPERTIES LABELS "examples;mpi" TIMEOUT 120
                       ENVIRONMENT "${SPMD_MPI_TEST_ENV}")
endif()
add_test(NAME readme_first_program
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/check_readme.sh ${PROJECT_SOURCE_DIR}/README.md
                 ${PROJECT_SOURCE_DIR}/examples/hello.c)
set_tests_properties(readme_first_program PROPERTIES LABELS "unit;examples")
