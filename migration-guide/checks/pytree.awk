# pytree.c: device d's gradients are w = d + 1, b = 2 (d + 1), scale = 3 (d + 1); their means
# over the N devices are (N + 1) / 2, N + 1 and 3 (N + 1) / 2 on every device.
BEGIN {
    w = (N + 1) / 2; b = N + 1; s = 3 * (N + 1) / 2
    for (d = 0; d < N; d++)
        want("device " d ": w [[" w ", " w "], [" w ", " w "]] b [" b ", " b "] scale " s)
}
