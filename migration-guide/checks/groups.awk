# groups.c: device d holds d + 1; psum over the pairs [[0,1],[2,3],...] gives device d the sum
# of its pair, (2 p + 1) + (2 p + 2) for pair p = d / 2, the same through the grouped pmap and
# the 2-D mesh.
BEGIN {
    for (d = 0; d < N; d++)
        want("device " d ": " (4 * int(d / 2) + 3))
    for (p = 0; p < P; p++)
        want("process " p ": grouped psum and 2-D mesh psum are bit-identical")
}
