# unreduced_grads.c: a (R, 2) mesh ('data', 'model'), R = N / 2, and B = 2 R examples, example
# e with x[e][k] = e + k + 1 (k < K = 4) and dy[e][j] = e - j (j < M = 4). Device (i, c), id
# 2 i + c, holds the partial sum of dw = x^T dy over its replica's examples 2 i, 2 i + 1 for
# columns 2 c, 2 c + 1; the sum over i is dw. The psum gives every device all of dw, and the
# psum_scatter gives device (i, c) rows i K / R .. (i + 1) K / R - 1 of its columns.
function dot(k, j, e0, e1,    e, s) {
    s = 0
    for (e = e0; e < e1; e++)
        s += (e + k + 1) * (e - j)
    return s
}
function block(lo, hi, c, e0, e1,    k, j, s) {
    s = ""
    for (k = lo; k < hi; k++)
        for (j = 2 * c; j < 2 * c + 2; j++)
            s = s " " dot(k, j, e0, e1)
    return s
}
BEGIN {
    K = 4; R = N / 2; B = 2 * R; rows = K / R
    want("dw: P(None, 'model', unreduced={'data'})")
    want_match("^SPMD_ERR_INVALID_ARGUMENT: spmd_array_to_host: the array is " \
               "P\\(None, 'model', unreduced=\\{'data'\\}\\): its devices hold partial " \
               "sums, not the value; ", 1)
    for (k = 0; k < K; k++)
        want("psum: dw[" k "] =" block(k, k + 1, 0, 0, B) block(k, k + 1, 1, 0, B))
    for (i = 0; i < R; i++)
        for (c = 0; c < 2; c++) {
            d = 2 * i + c
            want("device " d ": partial dw[0:" K ", " 2 * c ":" 2 * c + 2 "] =" \
                 block(0, K, c, 2 * i, 2 * i + 2))
            want("device " d ": psum_scatter dw[" i * rows ":" (i + 1) * rows ", " 2 * c ":" \
                 2 * c + 2 "] =" block(i * rows, (i + 1) * rows, c, 0, B))
        }
}
