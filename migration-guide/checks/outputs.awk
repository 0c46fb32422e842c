# outputs.c: y = x / 2 + 1 for x = arange(3N).reshape(N, 3) split by rows: readable whole on
# one process only (else SPMD_ERR_NOT_ADDRESSABLE, message printed once, by process 0); every
# process's allgather holds all N rows; the host-local part is (L, 3) starting at row p L.
# step(params) = (1, 2, 3) / 2 + 1 = 1.5 2 2.5, by unreplicate (on the process's first
# device, nothing copied) and by the replicated P() spelling.
BEGIN {
    for (r = 0; r < N; r++) # process 0's, on stdout
        want("allgather row " r ": " y(r, 0) " " y(r, 1) " " y(r, 2))
    want("replicated P(): 1.5 2 2.5")
    for (p = 0; p < P; p++) {
        want("process " p ": reading all of y here: " (P == 1 ? "SPMD_OK" : \
                                                        "SPMD_ERR_NOT_ADDRESSABLE"))
        for (r = 0; r < N; r++)
            want("process " p ": allgather row " r ": " y(r, 0) " " y(r, 1) " " y(r, 2))
        want("process " p ": host-local part (" L ", 3), first row " y(p * L, 0) " " \
             y(p * L, 1) " " y(p * L, 2))
        want("process " p ": unreplicate: 1.5 2 2.5 on device " p * L ", copied: no")
        want("process " p ": replicated P(): 1.5 2 2.5")
    }
    if (P > 1)
        want_match("^SPMD_ERR_NOT_ADDRESSABLE: spmd_array_to_host: fetching an array that " \
                   "spans non-addressable", 1)
}
function y(r, c) { return (3 * r + c) / 2 + 1 }
