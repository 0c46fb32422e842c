# Tests of the spmd CLI: each runs the built tool through check_cli.sh, which checks the exit
# status (and, for failures, the one-line "spmd: ..." message) and the real output.

set(SPMD_CLI_DIR ${CMAKE_CURRENT_LIST_DIR})
set(SPMD_CLI_EXPECTED ${CMAKE_CURRENT_LIST_DIR}/expected)

# spmd_cli_test(<name> [ENV <VAR=value>...] [LABELS <labels>...] ARGS <check_cli.sh arguments>)
# The CLI is "$<TARGET_FILE:spmd>" inside ARGS. Without ENV, tests see 8 CPU devices, so the
# caller's own SPMD_* settings cannot leak in. Empty arguments do not survive CMake lists: pass
# them as --opt= instead. Keep every [ and ] balanced within one argument: CMake does not split
# lists inside brackets.
function(spmd_cli_test name)
  cmake_parse_arguments(T "" "" "ENV;LABELS;ARGS" ${ARGN})
  if(NOT T_ENV)
    set(T_ENV SPMD_NUM_CPU_DEVICES=8 SPMD_PLATFORM=cpu)
  endif()
  if(NOT T_LABELS)
    set(T_LABELS unit) # tests under mpirun pass LABELS mpi instead
  endif()
  add_test(NAME cli_${name} COMMAND sh ${SPMD_CLI_DIR}/check_cli.sh ${T_ARGS})
  set_tests_properties(cli_${name} PROPERTIES LABELS "${T_LABELS};cli" TIMEOUT 60
                       ENVIRONMENT "${T_ENV}")
endfunction()

set(SPMD_CLI $<TARGET_FILE:spmd>)

# --- help and version ----------------------------------------------------------------------
spmd_cli_test(help ARGS -o "usage: spmd" -o "info" -o "sharding" -- ${SPMD_CLI} --help)
spmd_cli_test(help_command ARGS -o "usage: spmd sharding" -o "--devices" -- ${SPMD_CLI} help sharding)
spmd_cli_test(sharding_help ARGS -o "usage: spmd sharding" -o "--mesh" -o "--spec" -o "--shape"
              -o "--json" -- ${SPMD_CLI} sharding --help)
spmd_cli_test(info_help ARGS -o "usage: spmd info" -o "--json" -- ${SPMD_CLI} info -h)
spmd_cli_test(version ARGS -s "spmd ${PROJECT_VERSION}" -- ${SPMD_CLI} --version)

# --- info ----------------------------------------------------------------------------------
spmd_cli_test(info ARGS -o "version:   libspmd ${PROJECT_VERSION}" -o "features:  mpi="
              -o "processes: 1" -o "devices:   8" -o "platform:  cpu" -- ${SPMD_CLI} info)
spmd_cli_test(info_json ENV SPMD_NUM_CPU_DEVICES=2 SPMD_PLATFORM=cpu
              ARGS -n 1 -o "{\"version\":\"${PROJECT_VERSION}\",\"features\":{\"mpi\":"
              -o "\"platform\":\"cpu\",\"process_count\":1,\"device_count\":2,"
              -o "{\"id\":1,\"process\":0,\"local_ordinal\":1,\"platform\":\"cpu\",\"hardware_ordinal\":1}"
              -- ${SPMD_CLI} info --json)

# --- sharding: JSON, checked against the rule of SEMANTICS.md (c) ----------------------------
# P('a', None) on mesh (4,2) of an (8,8) array: device k is coordinate (k/2, k%2), holds rows
# [2(k/2), 2(k/2)+2) and all columns; axis b is unused, so its coordinate is the replica id.
spmd_cli_test(sharding_json
              ARGS -f ${SPMD_CLI_EXPECTED}/sharding_a4b2_a_8x8.json
              -o "{\"mesh\":{\"axis_names\":[\"a\",\"b\"],\"shape\":[4,2],\"device_ids\":[0,1,2,3,4,5,6,7]},"
              -o "\"shard_shape\":[2,8]"
              -o "{\"id\":2,\"process\":0,\"index\":[[2,4],[0,8]],\"replica_id\":0}"
              -o "{\"id\":3,\"process\":0,\"index\":[[2,4],[0,8]],\"replica_id\":1}"
              -- ${SPMD_CLI} sharding --mesh a=4,b=2 --spec "'a', None" --shape 8,8 --json)
# ('a','b') splits rows 8 ways, a major: device k holds rows [2k, 2k+2), nothing replicated.
add_test(NAME cli_sharding_json_bounded
         COMMAND sh ${SPMD_CLI_DIR}/check_sharding_json_bounded.sh ${SPMD_CLI})
set_tests_properties(cli_sharding_json_bounded PROPERTIES LABELS cli TIMEOUT 120
                     SKIP_RETURN_CODE 77 ENVIRONMENT "${SPMD_TEST_ENV}")
spmd_cli_test(sharding_json_multi_axis
              ARGS -f ${SPMD_CLI_EXPECTED}/sharding_a4b2_ab_16x4.json
              -- ${SPMD_CLI} sharding --mesh a=4,b=2 --spec "('a','b'), None" --shape 16,4 --json)
# The tuple's order, not the mesh's, decides which axis is major: ('b','a') puts device 1
# (a=0, b=1) at block 4.
spmd_cli_test(sharding_json_tuple_order
              ARGS -o "\"spec\":\"P(('b', 'a'),)\"" -o "\"shard_shape\":[1]"
              -o "{\"id\":1,\"process\":0,\"index\":[[4,5]],\"replica_id\":0}"
              -o "{\"id\":2,\"process\":0,\"index\":[[1,2]],\"replica_id\":0}"
              -- ${SPMD_CLI} sharding --mesh a=4,b=2 --spec "('b','a')" --shape 8 --json)
# A device subset in shuffled order: the mesh and the device list follow the given order.
spmd_cli_test(sharding_json_devices
              ARGS -f ${SPMD_CLI_EXPECTED}/sharding_x2_devices_3_1.json
              -- ${SPMD_CLI} sharding --mesh x=2 --devices 3,1 --spec "'x'" --shape 4 --json)
spmd_cli_test(sharding_json_devices_2d
              ARGS -f ${SPMD_CLI_EXPECTED}/sharding_a2b2_none_b_devices.json
              -- ${SPMD_CLI} sharding --mesh a=2,b=2 --devices 5,2,0,7 --spec "None, 'b'"
              --shape 4,6 --json)
# Fully replicated: every device holds everything, replica ids count up.
spmd_cli_test(sharding_json_replicated
              ARGS -o "\"spec\":\"P()\"" -o "\"shard_shape\":[4,2]"
              -o "{\"id\":3,\"process\":0,\"index\":[[0,4],[0,2]],\"replica_id\":3}"
              -- ${SPMD_CLI} sharding --mesh x=4 --spec= --shape 4,2 --json)

# --- sharding: real devices from the environment, or an abstract mesh --------------------------
# Unset: an abstract mesh (no devices), whose output equals the device-backed one (the same
# expected files as the tests above, which run on 8 CPU devices).
spmd_cli_test(sharding_auto_devices
              ARGS -u SPMD_NUM_CPU_DEVICES -f ${SPMD_CLI_EXPECTED}/sharding_a4b2_a_8x8.json
              -- ${SPMD_CLI} sharding --mesh a=4,b=2 --spec "'a', None" --shape 8,8 --json)
spmd_cli_test(sharding_auto_devices_ids
              ARGS -u SPMD_NUM_CPU_DEVICES -f ${SPMD_CLI_EXPECTED}/sharding_a2b2_none_b_devices.json
              -- ${SPMD_CLI} sharding --mesh a=2,b=2 --devices 5,2,0,7 --spec "None, 'b'"
              --shape 4,6 --json)
spmd_cli_test(sharding_env_too_small ENV SPMD_NUM_CPU_DEVICES=4
              ARGS -x 2 -e "SPMD_NUM_CPU_DEVICES=4" -e "needs 8"
              -- ${SPMD_CLI} sharding --mesh a=4,b=2 --spec "'a'" --shape 8)
spmd_cli_test(sharding_env_too_small_ids ENV SPMD_NUM_CPU_DEVICES=4
              ARGS -x 2 -e "SPMD_NUM_CPU_DEVICES" -e "id 6" -e "needs 7"
              -- ${SPMD_CLI} sharding --mesh x=2 --devices 6,1 --spec "'x'" --shape 8)

# --- sharding: the picture -----------------------------------------------------------------
spmd_cli_test(sharding_picture
              ARGS -o "NamedSharding(mesh=Mesh('a': 4, 'b': 2, axis_types=(Auto, Auto)), spec=P('a', None))"
              -o "shard shape: (2, 8)" -o "CPU 0,1" -o "CPU 6,7"
              -- ${SPMD_CLI} sharding --mesh a=4,b=2 --spec "'a', None" --shape 8,8)
spmd_cli_test(sharding_picture_rank3
              ARGS -o "NamedSharding(mesh=Mesh('x': 2, axis_types=(Auto,)), spec=P(None, None, 'x'))"
              -o "shard shape: (2, 3, 2)" -o "device 1: [0:2, 0:3, 2:4] replica 0"
              -- ${SPMD_CLI} sharding --mesh x=2 --spec "None, None, 'x'" --shape 2,3,4)

# --- usage errors: exit 2, one "spmd: " line saying what is wrong ---------------------------
spmd_cli_test(no_command ARGS -x 2 -e "no command" -- ${SPMD_CLI})
spmd_cli_test(unknown_command ARGS -x 2 -e "unknown command 'frobnicate'" -e "sharding"
              -- ${SPMD_CLI} frobnicate)
spmd_cli_test(unknown_global_option ARGS -x 2 -e "'--bogus'" -- ${SPMD_CLI} --bogus)
spmd_cli_test(unknown_option ARGS -x 2 -e "'--bogus'" -e "spmd sharding --help"
              -- ${SPMD_CLI} sharding --bogus --mesh x=2 --spec "'x'" --shape 2)
spmd_cli_test(option_needs_value ARGS -x 2 -e "'--shape' needs a value"
              -- ${SPMD_CLI} sharding --mesh x=2 --spec "'x'" --shape)
spmd_cli_test(option_takes_no_value ARGS -x 2 -e "'--json' takes no value"
              -- ${SPMD_CLI} info --json=yes)
# Found by tests/fuzz/fuzz_cli: an unknown short option after a long one was reported as the
# long one, and an argument holding a newline split the one-line report.
spmd_cli_test(unknown_short_after_long ARGS -x 2 -e "unknown option '-z'"
              -- ${SPMD_CLI} sharding --mesh=x=2 -zj)
spmd_cli_test(abbreviated_flag_with_value ARGS -x 2 -e "'--json' takes no value"
              -- ${SPMD_CLI} info --js=1)
spmd_cli_test(newline_in_argument ARGS -x 2 -e "unknown command 'fro b'" -- ${SPMD_CLI} "fro\nb")
spmd_cli_test(newline_in_mesh ARGS -x 2 -e "--mesh axis 'a b' has no size"
              -- ${SPMD_CLI} sharding --mesh "a\nb" --spec= --shape 1)
spmd_cli_test(unexpected_argument ARGS -x 2 -e "unexpected argument 'extra'"
              -- ${SPMD_CLI} info extra)
spmd_cli_test(mesh_size_zero ARGS -x 2 -e "axis 'a' has size 0" -e "at least 1"
              -- ${SPMD_CLI} sharding --mesh a=0 --spec "'a'" --shape 8)
spmd_cli_test(mesh_size_not_integer ARGS -x 2 -e "size 'x', not an integer"
              -- ${SPMD_CLI} sharding --mesh a=x --spec "'a'" --shape 8)
spmd_cli_test(mesh_no_name ARGS -x 2 -e "'=4' has no name"
              -- ${SPMD_CLI} sharding --mesh =4 --spec "'a'" --shape 8)
spmd_cli_test(mesh_no_size ARGS -x 2 -e "'b' has no size"
              -- ${SPMD_CLI} sharding --mesh a=2,b --spec "'a'" --shape 8)
spmd_cli_test(mesh_empty_axis ARGS -x 2 -e "empty axis"
              -- ${SPMD_CLI} sharding --mesh a=2,,b=2 --spec "'a'" --shape 8)
spmd_cli_test(missing_mesh ARGS -x 2 -e "missing --mesh"
              -- ${SPMD_CLI} sharding --spec "'a'" --shape 8)
spmd_cli_test(missing_spec ARGS -x 2 -e "missing --spec"
              -- ${SPMD_CLI} sharding --mesh a=2 --shape 8)
spmd_cli_test(missing_shape ARGS -x 2 -e "missing --shape"
              -- ${SPMD_CLI} sharding --mesh a=4,b=2 --spec "'a', None")
spmd_cli_test(shape_not_integer ARGS -x 2 -e "--shape extent 'x' is not an integer"
              -- ${SPMD_CLI} sharding --mesh a=2 --spec "'a'" --shape 8,x)
spmd_cli_test(shape_zero ARGS -x 2 -e "must be at least 1"
              -- ${SPMD_CLI} sharding --mesh a=2 --spec "'a'" --shape 8,0)
spmd_cli_test(shape_empty_extent ARGS -x 2 -e "empty extent"
              -- ${SPMD_CLI} sharding --mesh a=2 --spec "'a'" --shape 8,,8)
spmd_cli_test(devices_not_integer ARGS -x 2 -e "--devices id 'one' is not an integer"
              -- ${SPMD_CLI} sharding --mesh x=2 --devices 0,one --spec "'x'" --shape 4)
spmd_cli_test(devices_negative ARGS -x 2 -e "--devices id -1 is negative"
              -- ${SPMD_CLI} sharding --mesh x=2 --devices -1,0 --spec "'x'" --shape 4)
spmd_cli_test(devices_id_too_large ENV SPMD_NUM_CPU_DEVICES=8 SPMD_PLATFORM=cpu
              ARGS -x 2 -e "id 100000"
              -e "at most 4096 CPU devices"
              -- ${SPMD_CLI} sharding --mesh x=2 --devices 0,100000 --spec "'x'" --shape 4)
spmd_cli_test(mesh_too_large ARGS -x 2 -e "the mesh has 8192 devices" -e "abstract mesh"
              -- ${SPMD_CLI} sharding --mesh x=4096,y=2 --spec "'x'" --shape 4096)
# The abstract mesh: any size, ids below 2^24, and the output of the device-backed path.
spmd_cli_test(sharding_abstract_pod ARGS -u SPMD_NUM_CPU_DEVICES
              -o "{\"mesh\":{\"axis_names\":[\"a\",\"b\"],\"shape\":[1024,8],"
              -o "\"shard_shape\":[8,1024]"
              -o "{\"id\":0,\"process\":0,\"index\":[[0,8],[0,1024]],\"replica_id\":0}"
              -o "{\"id\":8191,\"process\":0,\"index\":[[8184,8192],[7168,8192]],\"replica_id\":0}"
              -- ${SPMD_CLI} sharding --mesh a=1024,b=8 --spec "'a','b'" --shape 8192,8192 --json)
spmd_cli_test(sharding_abstract_id_too_large ARGS -u SPMD_NUM_CPU_DEVICES -x 1
              -e "abstract device ids lie in 0..16777215"
              -- ${SPMD_CLI} sharding --mesh x=2 --devices 0,16777216 --spec "'x'" --shape 4)
add_test(NAME cli_sharding_abstract_equals_devices
         COMMAND sh ${SPMD_CLI_DIR}/check_abstract.sh ${SPMD_CLI})
set_tests_properties(cli_sharding_abstract_equals_devices PROPERTIES LABELS "unit;cli" TIMEOUT 120
                     ENVIRONMENT "${SPMD_TEST_ENV}")

# --- library failures: exit 1, the library's message --------------------------------------
spmd_cli_test(spec_unknown_axis ARGS -x 1 -e "the spec does not fit the mesh" -e "SPMD_ERR_SPEC"
              -- ${SPMD_CLI} sharding --mesh a=4,b=2 --spec "'c', None" --shape 8,8)
spmd_cli_test(spec_malformed ARGS -x 1 -e "invalid --spec" -e "SPMD_ERR_SPEC"
              -- ${SPMD_CLI} sharding --mesh a=4,b=2 --spec "('a'" --shape 8,8)
spmd_cli_test(shape_not_divisible ARGS -x 1 -e "does not fit --shape" -e "SPMD_ERR_SHAPE"
              -- ${SPMD_CLI} sharding --mesh a=4,b=2 --spec "'a', None" --shape 6,8)
spmd_cli_test(spec_longer_than_shape ARGS -x 1 -e "does not fit --shape"
              -- ${SPMD_CLI} sharding --mesh a=4,b=2 --spec "'a', 'b'" --shape 8)
spmd_cli_test(devices_duplicate ARGS -x 1 -e "cannot create the mesh"
              -- ${SPMD_CLI} sharding --mesh x=2 --devices 1,1 --spec "'x'" --shape 4)
spmd_cli_test(devices_count_mismatch ARGS -x 1 -e "cannot create the mesh"
              -- ${SPMD_CLI} sharding --mesh x=4 --devices 0,1 --spec "'x'" --shape 4)
spmd_cli_test(mesh_duplicate_axis ARGS -x 1 -e "cannot create the mesh"
              -- ${SPMD_CLI} sharding --mesh a=2,a=2 --spec "'a'" --shape 4)

# --- under mpirun ---------------------------------------------------------------------------
if(SPMD_HAVE_MPI)
  set(SPMD_CLI_MPI_ENV ${SPMD_MPI_TEST_ENV})
  # info: every process starts the runtime, process 0 prints once for all of them.
  spmd_cli_test(info_mpi_np2 ENV ${SPMD_CLI_MPI_ENV} SPMD_NUM_CPU_DEVICES=2 SPMD_PLATFORM=cpu
                LABELS mpi
                ARGS -n 1 -o "\"process_count\":2,\"device_count\":4"
                -o "{\"id\":2,\"process\":1,\"local_ordinal\":0,\"platform\":\"cpu\""
                -- ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
                ${SPMD_CLI} ${MPIEXEC_POSTFLAGS} info --json)
  # sharding is pure math: under mpirun each process answers alone, nobody waits for peers.
  spmd_cli_test(sharding_mpi_np2 ENV ${SPMD_CLI_MPI_ENV} SPMD_NUM_CPU_DEVICES=8
                LABELS mpi
                ARGS -n 2 -o "\"shard_shape\":[2,8]"
                -- ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS}
                ${SPMD_CLI} ${MPIEXEC_POSTFLAGS} sharding --mesh a=4,b=2 --spec "'a', None"
                --shape 8,8 --json)
endif()

# --- bench ---------------------------------------------------------------------------------
set(SPMD_CLI_HAVE_MPI 0)
if(SPMD_HAVE_MPI)
  set(SPMD_CLI_HAVE_MPI 1)
endif()
add_test(NAME cli_bench COMMAND sh ${SPMD_CLI_DIR}/check_bench.sh ${SPMD_CLI} ${SPMD_CLI_EXPECTED}
                                   ${SPMD_CLI_HAVE_MPI})
set_tests_properties(cli_bench PROPERTIES LABELS "bench;cli;mpi" TIMEOUT 300
                     ENVIRONMENT "${SPMD_MPI_TEST_ENV}")

# --- launch and compare: exit statuses, layouts compared, bad layouts, tolerances ----------
add_executable(launch_probe ${SPMD_CLI_DIR}/launch_probe.c)
target_link_libraries(launch_probe PRIVATE spmd::spmd)
target_compile_options(launch_probe PRIVATE ${SPMD_WARNINGS})
if(SPMD_HAVE_MPI)
  set(SPMD_LAUNCH_HAVE_MPI 1)
else()
  set(SPMD_LAUNCH_HAVE_MPI 0)
endif()
add_test(NAME cli_launch COMMAND sh ${SPMD_CLI_DIR}/check_launch.sh ${SPMD_CLI}
                                 $<TARGET_FILE:launch_probe> ${SPMD_LAUNCH_HAVE_MPI})
set_tests_properties(cli_launch PROPERTIES LABELS "mpi;cli" TIMEOUT 300 PROCESSORS 2
                     ENVIRONMENT "${SPMD_TEST_ENV}")

add_test(NAME cli_compare COMMAND sh ${SPMD_CLI_DIR}/check_compare.sh ${SPMD_CLI})
set_tests_properties(cli_compare PROPERTIES LABELS "cli" TIMEOUT 60)

# --- SpmdTesting, as the project's own tests use it: one test per layout, and a comparison
# that passes for the layout-independent sum and must fail for the output that names the layout
set(SPMD_TESTING_CLI ${SPMD_CLI})
include(${PROJECT_SOURCE_DIR}/src/SpmdTesting.cmake)
spmd_add_test(NAME spmd_testing_sum COMMAND launch_probe sum LAYOUTS 1x8 2x4 4x2
              COMPARE exact tolerance=1e-6 TIMEOUT 120 ENVIRONMENT ${SPMD_TEST_ENV})
# the saved outputs, for a comparison of one's own
add_test(NAME spmd_testing_sum_outputs_listed
         COMMAND ${SPMD_CLI} compare --compare abs=0 ${spmd_testing_sum_SPMD_OUTPUTS})
set_tests_properties(spmd_testing_sum_outputs_listed PROPERTIES
                     FIXTURES_REQUIRED spmd_testing_sum_layouts LABELS "cli;spmd")
# a COMPARE spmd compare would refuse fails at configure time
foreach(bad -1 tolerance=-1 abs=-1 rel=nan ulps=1.5 foo=1 0x10 "abs=1,")
  string(MAKE_C_IDENTIFIER "${bad}" id)
  add_test(NAME spmd_testing_refuses_${id}
           COMMAND ${CMAKE_COMMAND} -DSPMD_TESTING_CLI=${SPMD_CLI} -DHOW=${bad}
                   -P ${SPMD_CLI_DIR}/spmd_testing_compare.cmake)
  set_tests_properties(spmd_testing_refuses_${id} PROPERTIES LABELS cli
                       PASS_REGULAR_EXPRESSION "COMPARE \"${bad}\" is not exact")
endforeach()
if(SPMD_HAVE_MPI)
  spmd_add_test(NAME spmd_testing_layout COMMAND launch_probe layout LAYOUTS 1x4 2x2
                COMPARE tolerance=1e-6 TIMEOUT 120 ENVIRONMENT ${SPMD_TEST_ENV})
  set_tests_properties(spmd_testing_layout_compare PROPERTIES WILL_FAIL TRUE)
endif()
