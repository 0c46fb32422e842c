# moe_dispatch.c: global token t (T = 8 per device, device floor(t / T)) is the row t D .. t D +
# D - 1 (D = 4), routed to expert e(t) = (3 t + floor(t^2 / 7)) mod N on device e(t). Expert e
# gets its tokens in sender order, each sender's in token order (so ascending t), and scales
# them by e + 1: a token's row then sums to (e + 1) (D^2 t + D (D - 1) / 2), and its expert's
# checksum is the sum of those. Each row comes back to its token's device in token order.
BEGIN {
    T = 8; D = 4
    for (t = 0; t < N * T; t++)
        ex[t] = (3 * t + int(t * t / 7)) % N
    for (e = 0; e < N; e++) {
        from = ""; tokens = ""; checksum = 0
        for (h = 0; h < N; h++) {
            count = 0
            for (t = h * T; t < (h + 1) * T; t++)
                if (ex[t] == e) {
                    count++
                    tokens = tokens " " t
                    checksum += (e + 1) * (D * D * t + D * (D - 1) / 2)
                }
            from = from " " count
        }
        want("expert " e ": rows from devices" from ": tokens" tokens "; checksum " checksum)
        sums = ""
        for (t = e * T; t < (e + 1) * T; t++)
            sums = sums " " (ex[t] + 1) * (D * D * t + D * (D - 1) / 2)
        want("device " e ": row sums of y:" sums)
    }
}
