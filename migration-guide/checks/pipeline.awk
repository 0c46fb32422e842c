# pipeline.c: a (N / 2, 2) mesh ('data', 'stage'); replica r's microbatch m holds
# v = 100 r + 10 m + b + 1 (b = 0, 1, 2), and stage s maps v to v (s + 2) + (s + 1): each value
# passes stage 0 then stage 1, whichever devices and processes hold them.
BEGIN {
    S = 2; M = 4; B = 3
    for (r = 0; r < N / S; r++)
        for (m = 0; m < M; m++) {
            line = "replica " r ", microbatch " m ":"
            for (b = 0; b < B; b++) {
                v = 100 * r + 10 * m + b + 1
                for (s = 0; s < S; s++)
                    v = v * (s + 2) + (s + 1)
                line = line " " v
            }
            want(line)
        }
}
