/* Compiled, never run: the umbrella header must stand alone as strict C99. */
#include <spmd.h>

int spmd_header_selftest(void);
int spmd_header_selftest(void) { return SPMD_VERSION_NUMBER > 0 && SPMD_OK == 0; }
