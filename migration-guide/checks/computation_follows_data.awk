# computation_follows_data.c: a (2, 4) mesh ('x', 'y') of the 8 devices, a = float32[8,4] and
# b = float32[4,16]; each plan's bytes follow the cost model of spmd/array_ops.h (psum
# 2 (n-1)/n B, psum_scatter (n-1)/n B, all_gather (n-1) B of the block). Then the backward of a
# data-parallel layer on the 8 devices: dW[0][j] = sum over e < 16 of (e + 1) (e - j).
function psum(bytes, n) { return 2 * (n - 1) * bytes / n }
BEGIN {
    full = 8 * 16 * 4 # the local product float32[8,16]
    want("(i) float32[8@x,16@y], 0 collective(s), 0 B")
    want("SPMD_ERR_SPEC: spmd_array_matmul: float32[8,4@x] @ float32[4@x,16]: contracting " \
         "dimensions are sharded on both sides over 'x', and it is ambiguous how the result " \
         "should be sharded. Give an out_sharding: SPMD_REPLICATED, " \
         "float32[8,16] (psum over 'x', " psum(full, 2) " B per device); float32[8@x,16] " \
         "(psum_scatter over 'x', " full / 2 " B per device); float32[8,16@x] (psum_scatter " \
         "over 'x', " full / 2 " B per device); float32[8,16]{U:x} (unreduced: no communication)")
    want("matmul -> float32[8,16]: psum float32[8,16] over ('x') " psum(full, 2) " B")
    want("matmul -> float32[8@x,16]: psum_scatter float32[8,16] over ('x') " full / 2 " B")
    want("matmul -> float32[8,16@x]: psum_scatter float32[8,16] over ('x') " full / 2 " B")
    want("matmul -> float32[8,16]{U:x}: no communication")
    want("matmul -> float32[8,16@y]: all_gather float32[8,2] over ('x') " 8 * 2 * 4 " B")
    want("SPMD_ERR_SPEC: spmd_array_matmul: float32[8@x,4] @ float32[4,16@x] would use mesh " \
         "axis 'x' twice in its result (on free dimensions of both operands, or on a free and " \
         "a contracted one); reshard a's dimension on 'x' whole (" 8 * 4 * 4 / 2 " B per " \
         "device) or b's (" 4 * 16 * 4 / 2 " B per device) first")
    want("{\"op\":\"matmul\",\"out_type\":\"float32[8,16]\",\"bytes_per_device\":" psum(full, 2) \
         ",\"steps\":[{\"kind\":\"psum\",\"axes\":\"x\",\"dtype\":\"float32\"," \
         "\"bytes_per_device\":" psum(full, 2) ",\"text\":\"psum float32[8,16] over ('x')\"}]}")
    spent = psum(full, 2) + psum(4 * 4, 4)
    want("budget: " spent " B in 2 collective(s)")
    want("SPMD_ERR_SPEC: spmd_array_matmul: over the communication budget: " \
         "matmul(float32[8,4@x], float32[4@x,16]) (float32[8,16]) needs psum float32[8,16] " \
         "over ('x') " psum(full, 2) " B, " psum(full, 2) " B per device, after 2 collectives " \
         "and " spent " B spent, against limits of 2 collectives and 1024 B (-1: none); " \
         "nothing ran")
    want("matmul -> float32[4,16]: psum float32[4,16] over ('data') " psum(4 * 16 * 4, 8) " B")
    line = "dW[0] ="
    for (j = 0; j < 16; j++) {
        s = 0
        for (e = 0; e < 16; e++)
            s += (e + 1) * (e - j)
        line = line " " s
    }
    want(line)
    want("dW by hand and by array ops: the same bits")
}
