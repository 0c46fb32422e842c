# basic_map.c: x = arange(4N).reshape(N, 4), y = 2 x + i on the device of row i, so
# y[i][c] = 2 (4 i + c) + i = 9 i + 2 c, the same through pmap and shard_map.
BEGIN {
    for (i = 0; i < N; i++) {
        row = (9 * i) " " (9 * i + 2) " " (9 * i + 4) " " (9 * i + 6)
        want("pmap: device " i ": " row)
        want("shard_map: device " i ": " row)
    }
    for (p = 0; p < P; p++)
        want("process " p ": pmap and shard_map results are bit-identical")
}
