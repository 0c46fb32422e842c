# SpmdTesting: multi-process regression tests of libspmd programs under ctest.
#
#   find_package(spmd REQUIRED)
#   include(SpmdTesting)
#   spmd_add_test(NAME <name> COMMAND <target-or-program> [<arg>...]
#                 [LAYOUTS <P>x<L>...]              # default 1x1
#                 [COMPARE <how>...]                # also <name>_compare[_<how>]
#                 [TIMEOUT <seconds>]               # per layout, default 300
#                 [ENVIRONMENT <VAR=value>...]
#                 [LABELS <label>...]
#                 [WORKING_DIRECTORY <dir>])
#
# Registers one test per layout, <name>_<P>x<L>: the program runs as P processes of L devices
# each through `spmd launch` (libspmd's CLI), which starts it under the mpiexec libspmd was
# built with, sets SPMD_NUM_CPU_DEVICES (and SPMD_CUDA_DEVICES_PER_GPU) to L, adds what Open
# MPI needs as root, in a container and with more processes than cores, and forwards the exit
# status. Each layout test claims P x L processors (capped at this machine's) so that
# `ctest -j` does not oversubscribe the cores, and saves the program's standard output. The
# tests are labelled spmd, and mpi too where libspmd has MPI (spmd launch then starts every
# layout under mpiexec): ctest -L / -LE select them.
#
# With COMPARE, <name>_compare runs after the layouts (a ctest fixture) and fails when their
# outputs differ (`spmd compare --compare <how>`): `exact` (every byte), or numbers found
# inside the text compared within a tolerance and everything else equal: `<t>` or
# `tolerance=<t>` (|a-b| <= t x max(1, |a|, |b|)), `abs=<a>`, `rel=<r>`, `ulps=<n>`,
# `ulps32=<n>`, or several of them comma-separated (any one suffices). Several <how>s (e.g.
# COMPARE exact tolerance=1e-6) make one test each, <name>_compare_<how> (characters other
# than letters, digits, '.', '-' and '_' become '_'); each is checked when CMake configures.
# Each saved output is in process order (process 0's lines, then process 1's, ...): print
# results from process 0, or per device in device order, and what depends on the layout on
# stderr. The outputs are saved as ${CMAKE_CURRENT_BINARY_DIR}/spmd_test_outputs/<name>_<P>x<L>.out,
# and their list is left in the variable <name>_SPMD_OUTPUTS for further tests of your own
# (make them FIXTURES_REQUIRED <name>_layouts).
#
# Layouts of several processes need a libspmd built with MPI; without it they are left out
# with a message. SPMD_TESTING_CLI names the spmd CLI (find_package(spmd) sets it).

if(NOT SPMD_TESTING_CLI)
  message(FATAL_ERROR "SpmdTesting: SPMD_TESTING_CLI is not set; include(SpmdTesting) after "
                      "find_package(spmd)")
endif()
cmake_host_system_information(RESULT _spmd_testing_cores QUERY NUMBER_OF_LOGICAL_CORES)

function(spmd_add_test)
  cmake_parse_arguments(PARSE_ARGV 0 T "" "NAME;TIMEOUT;WORKING_DIRECTORY"
                        "COMMAND;LAYOUTS;ENVIRONMENT;LABELS;COMPARE")
  if(T_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "spmd_add_test: unknown arguments \"${T_UNPARSED_ARGUMENTS}\"")
  endif()
  if(NOT T_NAME OR NOT T_COMMAND)
    message(FATAL_ERROR "spmd_add_test: NAME and COMMAND are required")
  endif()
  if(NOT T_LAYOUTS)
    set(T_LAYOUTS 1x1)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  # what `spmd compare --compare` accepts, checked now rather than when the test runs
  foreach(how IN LISTS T_COMPARE)
    set(valid TRUE)
    if(NOT how STREQUAL "exact")
      string(REPLACE "," ";" criteria "${how}")
      if(how MATCHES "(^,|,,|,$)" OR how STREQUAL "")
        set(valid FALSE)
      endif()
      foreach(criterion IN LISTS criteria)
        if(NOT criterion MATCHES "^(tolerance=|abs=|rel=)?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?$"
           AND NOT criterion MATCHES "^ulps(32)?=[0-9]+$")
          set(valid FALSE)
        endif()
      endforeach()
    endif()
    if(NOT valid)
      message(FATAL_ERROR "spmd_add_test(${T_NAME}): COMPARE \"${how}\" is not exact, <t>, "
                          "tolerance=<t>, abs=<a>, rel=<r>, ulps=<n>, ulps32=<n> (numbers >= 0) "
                          "or several of them, comma-separated")
    endif()
  endforeach()
  if("COMPARE" IN_LIST T_KEYWORDS_MISSING_VALUES)
    message(FATAL_ERROR "spmd_add_test(${T_NAME}): COMPARE needs exact or a tolerance")
  endif()
  list(POP_FRONT T_COMMAND program)
  if(TARGET ${program})
    set(program $<TARGET_FILE:${program}>)
  endif()
  set(outputs "")
  set(tests "")
  file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/spmd_test_outputs)
  foreach(layout IN LISTS T_LAYOUTS)
    if(NOT layout MATCHES "^([1-9][0-9]*)x([1-9][0-9]*)$")
      message(FATAL_ERROR "spmd_add_test(${T_NAME}): layout \"${layout}\" is not PxL "
                          "(processes x devices per process, e.g. 2x4)")
    endif()
    set(procs ${CMAKE_MATCH_1})
    set(devices ${CMAKE_MATCH_2})
    if(procs GREATER 1 AND NOT SPMD_HAVE_MPI)
      message(STATUS "spmd_add_test(${T_NAME}): layout ${layout} left out: libspmd was built "
                     "without MPI")
      continue()
    endif()
    set(test ${T_NAME}_${layout})
    set(output ${CMAKE_CURRENT_BINARY_DIR}/spmd_test_outputs/${test}.out)
    math(EXPR processors "${procs} * ${devices}")
    if(processors GREATER _spmd_testing_cores)
      set(processors ${_spmd_testing_cores})
    endif()
    add_test(NAME ${test}
             COMMAND ${SPMD_TESTING_CLI} launch -n ${procs} -d ${devices} --output ${output}
                     -- ${program} ${T_COMMAND})
    set(labels spmd ${T_LABELS})
    if(SPMD_HAVE_MPI)
      list(APPEND labels mpi)
    endif()
    list(REMOVE_DUPLICATES labels)
    set_tests_properties(${test} PROPERTIES PROCESSORS ${processors} TIMEOUT ${T_TIMEOUT}
                         LABELS "${labels}" ENVIRONMENT "${T_ENVIRONMENT}")
    if(T_WORKING_DIRECTORY)
      set_tests_properties(${test} PROPERTIES WORKING_DIRECTORY ${T_WORKING_DIRECTORY})
    endif()
    list(APPEND outputs ${output})
    list(APPEND tests ${test})
  endforeach()
  set(${T_NAME}_SPMD_OUTPUTS "${outputs}" PARENT_SCOPE)
  list(LENGTH outputs count)
  list(LENGTH T_COMPARE hows)
  if(hows GREATER 0 AND count GREATER 1)
    foreach(how IN LISTS T_COMPARE)
      set(compare ${T_NAME}_compare)
      if(hows GREATER 1)
        string(REGEX REPLACE "[^A-Za-z0-9_.-]" "_" suffix "${how}")
        set(compare ${T_NAME}_compare_${suffix})
      endif()
      add_test(NAME ${compare}
               COMMAND ${SPMD_TESTING_CLI} compare --compare ${how} ${outputs})
      set_tests_properties(${compare} PROPERTIES FIXTURES_REQUIRED ${T_NAME}_layouts
                           LABELS "spmd;${T_LABELS}" TIMEOUT 60)
    endforeach()
  endif()
  if(count GREATER 0)
    set_tests_properties(${tests} PROPERTIES FIXTURES_SETUP ${T_NAME}_layouts)
  endif()
endfunction()
