# multiprocess.c: process 0's seed 1234 reaches everyone; the shard_map sums 1..8 = 36 on every
# process; process p's value 10 p gathered everywhere, in process order; process p's local pmap
# (p + 1 calls) sums 10 p + i over its own L devices only. The failure
# demonstrations give every process the same status: device 7's pmax against device 6's psum
# is a mismatch naming both; device 7 arriving late is a timeout naming it (one process) or its
# process P - 1 (several); the mesh then still works in one process but is refused across
# processes; differently named barriers are a mismatch quoting both names, a device_put of
# other data on the last process an invalid argument naming it, and a late last process a
# timeout naming it. Process 0 prints each message once.
BEGIN {
    g = ""
    for (p = 0; p < P; p++)
        g = g " " 10 * p
    want("seed 1234, total 36") # process 0's, on stdout
    for (p = 0; p < P; p++) {
        want("process " p ": seed 1234, total 36, gathered" g)
        # the local pmap: process p sums 10 p + i over its own L devices, p + 1 times
        s = 0
        for (i = 0; i < L; i++)
            s += 10 * p + i
        sums = ""
        for (i = 0; i < L; i++)
            sums = sums " " s
        want("process " p ": local pmap over " L " devices, " p + 1 " call(s): sums" sums)
        want("process " p ": devices call different collectives: SPMD_ERR_COLLECTIVE_MISMATCH")
        want("process " p ": a device arrives late: SPMD_ERR_TIMEOUT")
        want("process " p ": the same mesh afterwards: " (P == 1 ? "SPMD_OK" : \
                                                        "SPMD_ERR_DISTRIBUTED"))
        if (P > 1) {
            want("process " p ": barrier names differ: SPMD_ERR_COLLECTIVE_MISMATCH")
            want("process " p ": device_put data differs: SPMD_ERR_INVALID_ARGUMENT")
            want("process " p ": a process arrives late: SPMD_ERR_TIMEOUT")
        }
    }
    want_match("^SPMD_ERR_COLLECTIVE_MISMATCH: .*devices issued different collectives: " \
               "device 6 called psum .* device 7 called pmax ", 1)
    if (P == 1)
        want_match("^SPMD_ERR_TIMEOUT: spmd_shard_map: device 6 waited in psum .* for device\\(s\\) 7, ", 1)
    else {
        want_match("^SPMD_ERR_TIMEOUT: spmd_shard_map .*: process\\(es\\) " P - 1 \
                   " did not arrive ", 1)
        want_match("^SPMD_ERR_DISTRIBUTED: spmd_shard_map: this mesh is unusable ", 1)
        want_match("^SPMD_ERR_COLLECTIVE_MISMATCH: processes issued different collectives: " \
                   "process 0 called sync_global_devices\\('epoch 1'\\) \\(its call #[0-9]+, " \
                   "thread 1\\), process 1 called sync_global_devices\\('epoch 2'\\)", 1)
        want_match("^SPMD_ERR_INVALID_ARGUMENT: spmd_device_put: the host data passed to " \
                   "device_put is not the same on each process: process\\(es\\) \\[" P - 1 \
                   "\\] passed other values than process\\(es\\) \\[0", 1)
        want_match("^SPMD_ERR_TIMEOUT: spmd_sync_global_devices: process\\(es\\) " P - 1 \
                   " did not arrive ", 1)
    }
}
