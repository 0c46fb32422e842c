// Compiled, never run: the umbrella header must be usable from C++.
#include <spmd.h>

int spmd_header_selftest_cxx() { return spmd_dtype_size(SPMD_DTYPE_F32) == 4 ? 0 : 1; }
