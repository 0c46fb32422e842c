# device_put.c: device_put_sharded puts row i = (10 i, 10 i + 1, 10 i + 2) on device i, and
# device_put_replicated w = (0.5, 1.5, 2.5) on every device, both as (N, 3) arrays sharded over a
# 1-D mesh of the devices, so not fully replicated (JAX: NamedSharding(Mesh(devices,
# ('_device_put_sharded',)) or ('_device_put_replicated',)), P(...)), is_fully_replicated False); the native spellings hold the
# same bytes on each device, and only P() is fully replicated, with shape (3,).
BEGIN {
    for (p = 0; p < P; p++) {
        st = "NamedSharding(mesh=Mesh('_device_put_sharded': " N ", axis_types=(Auto,)), spec=P('_device_put_sharded',))"
        rt = "NamedSharding(mesh=Mesh('_device_put_replicated': " N \
             ", axis_types=(Auto,)), spec=P('_device_put_replicated',))"
        want("process " p ": device_put_sharded: (" N ", 3), " st ", fully replicated: no")
        want("process " p ": device_put_replicated: (" N ", 3), " rt ", fully replicated: no")
        want("process " p ": from_callback: (" N ", 3), NamedSharding(mesh=Mesh('i': " N \
             ", axis_types=(Auto,)), spec=P('i',)), fully replicated: no")
        want("process " p ": device_put P(): (3,), NamedSharding(mesh=Mesh('i': " N \
             ", axis_types=(Auto,)), spec=P()), fully replicated: yes")
        want("process " p ": device_put_replicated marks stacked replicas: yes")
    }
    for (d = 0; d < N; d++) {
        r = (10 * d) " " (10 * d + 1) " " (10 * d + 2)
        want("device " d ": row " r " | " r "; copy 0.5 1.5 2.5 | 0.5 1.5 2.5; bit-identical")
    }
}
