# donation.c: y = x / 2 + 1 with x = arange(4N).reshape(N, 4), row r on device r, the same
# through pmap and shard_map (donated, fn seeing distinct blocks) and in place (the output in
# the donated input's memory, process 0 says so once); reading the donated input fails
# (process 0 prints the message once).
BEGIN {
    for (r = 0; r < N; r++) {
        row = ""
        for (c = 0; c < 4; c++)
            row = row (c ? " " : "") ((4 * r + c) / 2 + 1)
        want("device " r ": " row " | " row)
    }
    for (p = 0; p < P; p++) {
        want("process " p ": pmap and shard_map results are bit-identical")
    }
    want("in place: the output is in x2's memory: yes")
    want_match("^SPMD_ERR_INVALID_ARGUMENT: spmd_array_to_host: argument 'array' has been " \
               "deleted: it was donated to spmd_shard_map", 1)
}
