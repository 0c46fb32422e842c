# inputs.c: x = arange(16).reshape(8, 2) on the (4, 2) mesh with P('x', 'y'): device d holds
# rows 2 (d / 2) .. +2 of column d % 2, both ways of building x agree, and the host-local
# array (8 / P, 2) maps to the global (8, 2) (JAX's test: 4 processes, local (2, 2) =
# arange(4) + 4 p, global arange(16).reshape(8, 2)). Shard_map refuses P('x', 'y') for
# in_specs P('x', None); after the reshard, which sends nothing across processes (each row's
# two columns live on one process), device d holds the row sums 4 r + 1 of its two rows.
BEGIN {
    for (d = 0; d < 8; d++) {
        r = 2 * int(d / 2); c = d % 2
        v = (2 * r + c) " " (2 * (r + 1) + c)
        want("device " d " holds x[" r ":" r + 2 ", " c "]: " v " | " v)
        want("device " d ": row sums " r ":" r + 2 " = " (4 * r + 1) " " (4 * (r + 1) + 1))
    }
    for (p = 0; p < P; p++) {
        want("process " p ": local (" 8 / P ", 2) -> global (8, 2) and (8, 2); shares the " \
             "local buffers: yes")
        want("process " p ": reshard sent 0 bytes to other processes")
    }
    want_match("^SPMD_ERR_INCOMPATIBLE_DEVICES: spmd_shard_map: input 0 is laid out as " \
               "NamedSharding\\(mesh=Mesh\\('x': 4, 'y': 2, axis_types=\\(Auto, Auto\\)\\), spec=P\\('x', 'y'\\)\\)", 1)
}
