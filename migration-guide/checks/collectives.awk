# collectives.c, x = arange(4N).reshape(N, 4), row r on device r (JAX's pmap tests, N = 8):
# x - psum(x) = x - x.sum(0), where x.sum(0)[c] = 4 N (N - 1) / 2 + N c (N = 8: 112 120 128
# 136); all_gather gives every device all of x; ppermute (j -> j + 1 mod N) gives device r
# row r - 1 mod N.
BEGIN {
    for (r = 0; r < N; r++) {
        d = ""; q = ""; g = ""
        for (c = 0; c < 4; c++) {
            colsum = 0
            for (k = 0; k < N; k++)
                colsum += 4 * k + c
            d = d (c ? " " : "") (4 * r + c - colsum)
            q = q (c ? " " : "") (4 * ((r + N - 1) % N) + c)
            g = g (c ? " " : "") (4 * r + c)
        }
        want("x - psum(x): device " r ": " d " | " d)
        want("ppermute: device " r ": " q " | " q)
        for (p = 0; p < P; p++)
            want("all_gather: process " p ": row " r ": " g)
    }
    for (p = 0; p < P; p++)
        want("process " p ": pmap and shard_map results are bit-identical")
}
