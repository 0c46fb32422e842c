# unmapped.c: x[r][c] = r + c + 1, w = (1, 2, 3, 4); y[r][c] = x[r][c] w[c] on device r, and
# total[c] = w[c] * sum over r of x[r][c], on every process; "pmap | shard_map", equal.
BEGIN {
    for (r = 0; r < N; r++) {
        row = ""
        for (c = 0; c < 4; c++)
            row = row (c ? " " : "") (r + c + 1) * (c + 1)
        want("y: device " r ": " row " | " row)
    }
    tot = ""
    for (c = 0; c < 4; c++) {
        s = 0
        for (r = 0; r < N; r++)
            s += (r + c + 1) * (c + 1)
        tot = tot (c ? " " : "") s
    }
    for (p = 0; p < P; p++) {
        want("total: process " p ": " tot " | " tot)
        want("process " p ": pmap and shard_map results are bit-identical")
    }
}
