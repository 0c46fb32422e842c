# errors.c: each call fails with its documented status on every process that makes it, and the
# messages carry JAX's key phrases where JAX has one (SEMANTICS.md (j)): "implies that array
# axis 0 ... is partitioned 8 times, but the dimension size is 6", "Resource axis: k ... is not
# found in mesh" (libspmd: "resource axis 'k' of P('k', None) is not found in mesh"), "require
# replication"-style claims naming the axis; device 7 belongs to process 3 under 4 x 2.
BEGIN {
    for (p = 0; p < P; p++) {
        want("process " p ": mesh of 3 over all 8 devices: SPMD_ERR_INVALID_ARGUMENT")
        want("process " p ": 6 rows split 8 ways: SPMD_ERR_SHAPE")
        want("process " p ": spec with a missing parenthesis: SPMD_ERR_SPEC")
        want("process " p ": spec naming axis 'k': SPMD_ERR_SPEC")
        want("process " p ": replicated input for in_specs P('i'): SPMD_ERR_INCOMPATIBLE_DEVICES")
        want("process " p ": drawing a 3-D array: SPMD_ERR_UNSUPPORTED")
    }
    want("process 0: out_specs P() for differing values: SPMD_ERR_SPEC")
    want_match("^SPMD_ERR_INVALID_ARGUMENT: spmd_mesh_create: the mesh shape holds 3 devices", 1)
    want_match("^SPMD_ERR_SHAPE: .* implies that array axis 0 of the array is partitioned 8 " \
               "times, but the dimension size is 6 ", 1)
    want_match("^SPMD_ERR_SPEC: spmd_spec_parse: unbalanced parentheses", 1)
    want_match("^SPMD_ERR_SPEC: spmd_sharding_create_parse: resource axis 'k' of P\\('k', None\\) is not found in mesh " \
               "Mesh\\('i': 8, axis_types=\\(Auto,\\)\\)", 1)
    want_match("^SPMD_ERR_INCOMPATIBLE_DEVICES: spmd_shard_map: input 0 is laid out as " \
               "NamedSharding\\(mesh=Mesh\\('i': 8, axis_types=\\(Auto,\\)\\), spec=P\\(\\)\\)", 1)
    want_match("^SPMD_ERR_UNSUPPORTED: spmd_visualize_sharding: .* got rank 3", 1)
    want_match("^SPMD_ERR_SPEC: spmd_shard_map: output 0: out_specs\\[0\\] = P\\(\\) claims " \
               "the output is replicated over mesh axis 'i', but devices 0 and 1 ", 1)
    if (P > 1) {
        want("process 0: array on device 7 made by process 0: SPMD_ERR_NOT_ADDRESSABLE")
        want_match("^SPMD_ERR_NOT_ADDRESSABLE: spmd_array_create_on_device: device 7 " \
                   "belongs to process " P - 1 ", not to this process", 1)
    }
}
