# model.c: pmap hands device d row d of arange(32).reshape(8, 4) with the mapped axis removed,
# shape (4,) (JAX's docs: (8, 128) under pmap gives (128,)); shard_map hands it the block
# x[d:d+1], shape (1, 4) (under P('i'): (1, 128)). On the (4, 2) mesh, P('i', 'j') gives device
# d rows 2*(d/2) .. +2 and columns 2*(d%2) .. +2 of the (8, 4) array.
BEGIN {
    for (d = 0; d < 8; d++) {
        want("pmap: device " d " sees shape (4,), first value " 4 * d)
        want("shard_map: device " d " sees shape (1, 4), first value " 4 * d)
        r = 2 * int(d / 2); c = 2 * (d % 2)
        want("device " d " holds x[" r ":" r + 2 ", " c ":" c + 2 "]")
    }
    for (p = 0; p < P; p++)
        want("process " p ": NamedSharding(mesh=Mesh('i': 4, 'j': 2, axis_types=(Auto, Auto)), spec=P('i', 'j'))")
}
