# A COMPARE that spmd compare would refuse fails when CMake configures, naming it:
#   cmake -DSPMD_TESTING_CLI=spmd -DHOW=<how> -P spmd_testing_compare.cmake
include(${CMAKE_CURRENT_LIST_DIR}/../../src/SpmdTesting.cmake)
spmd_add_test(NAME probe COMMAND probe LAYOUTS 1x2 2x1 COMPARE exact ${HOW})
