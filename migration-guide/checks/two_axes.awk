# two_axes.c: x = arange(32).reshape(4, 2, 4) on the (4, 2) mesh, device d = 2 i + j holding
# x[i, j]; psum over 'j' gives device d x[i, 0] + x[i, 1], element k: 8 i + 4 + 2 k; psum over
# both gives sum over d of x[d], element k: 4 * 28 + 8 k = 112 + 8 k (JAX's migration doc: a
# (4, 2, 128) input summed over ('i', 'j') is a replicated (128,)).
BEGIN {
    for (d = 0; d < 8; d++) {
        i = int(d / 2); row = ""
        for (k = 0; k < 4; k++)
            row = row (k ? " " : "") (x(i, 0, k) + x(i, 1, k))
        want("psum over j: device " d ": " row " | " row)
    }
    tot = ""
    for (k = 0; k < 4; k++) {
        s = 0
        for (i = 0; i < 4; i++)
            for (j = 0; j < 2; j++)
                s += x(i, j, k)
        tot = tot (k ? " " : "") s
    }
    for (p = 0; p < P; p++) {
        want("psum over i,j: process " p ": " tot " | " tot)
        want("process " p ": pmap and shard_map results are bit-identical")
    }
}
function x(i, j, k) { return (i * 2 + j) * 4 + k }
