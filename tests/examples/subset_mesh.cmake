# examples/subset_mesh: a mesh over half of the devices, checked against an awk reference
# (check_subset_mesh.sh).
add_test(NAME example_subset_mesh_1x8
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/check_subset_mesh.sh 1 8
                 $<TARGET_FILE:subset_mesh>)
set_tests_properties(example_subset_mesh_1x8 PROPERTIES LABELS "examples" TIMEOUT 120
                     ENVIRONMENT "${SPMD_TEST_ENV}")
if(SPMD_HAVE_MPI)
  foreach(layout 4x2 2x4)
    string(REPLACE "x" ";" pd ${layout})
    list(GET pd 0 procs)
    list(GET pd 1 per)
    add_test(NAME example_subset_mesh_${layout}
             COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/check_subset_mesh.sh ${procs} ${per}
                     $<TARGET_FILE:subset_mesh> ${MPIEXEC_EXECUTABLE})
    set_tests_properties(example_subset_mesh_${layout} PROPERTIES LABELS "examples;mpi"
                         TIMEOUT 120 ENVIRONMENT "${SPMD_MPI_TEST_ENV}")
  endforeach()
endif()
