/* The sweeps of mesh.h, spec.h and sharding.h (test_api_sweep). */
#define _POSIX_C_SOURCE 200809L

#include "sweep.h"

/* ==== mesh.h ================================================================================== */

void sweep_spmd_mesh_create(void)
{
    const int s22[2] = {2, 2}, s4[1] = {4}, s1[1] = {1}, s9[9] = {4, 1, 1, 1, 1, 1, 1, 1, 1};
    const int s0[2] = {0, 4}, sneg[2] = {-1, -4}, smin[2] = {INT_MIN, 1}, smax[2] = {INT_MAX, 1};
    const int sbig[2] = {1 << 12, 1 << 13};
    const char *n9[9] = {"a", "b", "c", "d", "e", "f", "g", "h", "i"};
    const char *null_name[2] = {NULL, "y"}, *empty[2] = {"x", ""}, *none[2] = {"None", "y"},
               *comma[2] = {"x,", "y"}, *quote[2] = {"x", "y'"}, *space[2] = {"a b", "y"};
    char long_name[SPMD_MAX_AXIS_NAME + 2];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    const char *too_long[2] = {long_name, "y"};

    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(2, s22, XY, NULL, 0, &out)); /* before spmd_init */
    fixture_up();
    BAD(INV, spmd_mesh_create(2, s22, XY, NULL, 0, NULL));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(-1, s22, XY, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(SPMD_MAX_MESH_AXES + 1, s9, n9, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(INT_MAX, s22, XY, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(INT_MIN, s22, XY, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(2, NULL, XY, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(2, s22, NULL, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(2, s22, null_name, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(2, s22, empty, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(2, s22, none, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(2, s22, comma, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(2, s22, quote, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(2, s22, space, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(2, s22, too_long, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(2, s22, XX, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(2, s0, XY, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(2, sneg, XY, DEV4, 4, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(2, smin, XY, DEV4, 4, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(2, smax, XY, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(2, sbig, XY, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(1, s1, XY, NULL, 0, &out)); /* not all devices */
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(0, NULL, NULL, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(0, NULL, NULL, DEV4, 2, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(2, s22, XY, DEV_NEG, 4, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(2, s22, XY, DEV_BIG, 4, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(2, s22, XY, DEV_MAX, 4, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(2, s22, XY, DEV_MIN, 4, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(2, s22, XY, DEV_DUP, 4, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(2, s22, XY, DEV4, 3, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(1, s4, ONE_I, DEV_LONG, 5, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(2, s22, XY, DEV4, -1, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(2, s22, XY, DEV4, INT_MAX, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create(2, s22, XY, DEV4, INT_MIN, &out));
}

void sweep_spmd_mesh_create_abstract(void)
{
    const int s22[2] = {2, 2}, s9[9] = {4, 1, 1, 1, 1, 1, 1, 1, 1}, s0[2] = {0, 4},
              sneg[2] = {-1, -4}, smax[2] = {INT_MAX, 1}, sbig[2] = {1 << 12, 1 << 13};
    const int huge_id[4] = {0, 1, 2, 1 << 24};
    const char *n9[9] = {"a", "b", "c", "d", "e", "f", "g", "h", "i"};
    const char *none[2] = {"None", "y"};
    /* needs no spmd_init: every refusal below holds before it too */
    BAD(INV, spmd_mesh_create_abstract(2, s22, XY, NULL, 0, NULL));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_abstract(-1, s22, XY, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV,
            spmd_mesh_create_abstract(SPMD_MAX_MESH_AXES + 1, s9, n9, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_abstract(INT_MIN, s22, XY, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_abstract(2, NULL, XY, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_abstract(2, s22, NULL, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_abstract(2, s22, none, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_abstract(2, s22, XX, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_abstract(2, s0, XY, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_abstract(2, sneg, XY, DEV4, 4, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_abstract(2, smax, XY, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_abstract(2, sbig, XY, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_abstract(0, NULL, NULL, NULL, 0, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_abstract(2, s22, XY, DEV_NEG, 4, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_abstract(2, s22, XY, DEV_MAX, 4, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_abstract(2, s22, XY, DEV_MIN, 4, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_abstract(2, s22, XY, huge_id, 4, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_abstract(2, s22, XY, DEV_DUP, 4, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_abstract(2, s22, XY, DEV4, 3, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_abstract(2, s22, XY, DEV4, -1, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_abstract(2, s22, XY, DEV4, INT_MAX, &out));
}

void sweep_spmd_mesh_is_abstract(void)
{
    Q_INT(0, spmd_mesh_is_abstract(NULL));
    Q_INT(0, spmd_mesh_is_abstract(DEAD_MESH));
    fixture_up();
    Q_INT(0, spmd_mesh_is_abstract(M));
}

void sweep_spmd_mesh_create_hybrid(void)
{
    const int s14[2] = {1, 4}, s11[2] = {1, 1}, s12[2] = {1, 2}, s21[2] = {2, 1};
    const int s0[2] = {0, 4}, sneg[2] = {-1, -4}, smin[2] = {INT_MIN, 1}, smax[2] = {INT_MAX, 1};
    const int s9[9] = {4, 1, 1, 1, 1, 1, 1, 1, 1}, o9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    const char *n9[9] = {"a", "b", "c", "d", "e", "f", "g", "h", "i"};

    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_hybrid(2, s14, s11, XY, &out)); /* before init */
    fixture_up();
    BAD(INV, spmd_mesh_create_hybrid(2, s14, s11, XY, NULL));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_hybrid(0, s14, s11, XY, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_hybrid(-1, s14, s11, XY, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_hybrid(SPMD_MAX_MESH_AXES + 1, s9, o9, n9, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_hybrid(INT_MAX, s14, s11, XY, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_hybrid(INT_MIN, s14, s11, XY, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_hybrid(2, NULL, s11, XY, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_hybrid(2, s14, NULL, XY, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_hybrid(2, s14, s11, NULL, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_hybrid(2, s0, s11, XY, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_hybrid(2, sneg, s11, XY, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_hybrid(2, smin, s11, XY, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_hybrid(2, smax, s11, XY, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_hybrid(2, s14, s0, XY, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_hybrid(2, s14, smin, XY, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_hybrid(2, s14, smax, XY, &out));
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_hybrid(2, s12, s11, XY, &out)); /* 2 of 4 devices */
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_hybrid(2, s14, s21, XY, &out)); /* 2 processes */
    BAD_OUT(spmd_mesh, INV, spmd_mesh_create_hybrid(2, s14, s11, XX, &out));
}

void sweep_spmd_mesh_retain(void)
{
    fixture_up();
    Q_NULL(spmd_mesh_retain(NULL));
    Q_PTR(g_dead, spmd_mesh_retain(DEAD_MESH));
}

void sweep_spmd_mesh_destroy(void)
{
    Q_VOID(spmd_mesh_destroy(NULL));
    fixture_up();
    Q_VOID(spmd_mesh_destroy(DEAD_MESH));
}

void sweep_spmd_mesh_ndim(void)
{
    Q_INT(-1, spmd_mesh_ndim(NULL));
    Q_INT(-1, spmd_mesh_ndim(DEAD_MESH));
}

void sweep_spmd_mesh_size(void)
{
    Q_INT(0, spmd_mesh_size(NULL));
    Q_INT(0, spmd_mesh_size(DEAD_MESH));
}

void sweep_spmd_mesh_axis_size(void)
{
    fixture_up();
    Q_INT(-1, spmd_mesh_axis_size(NULL, 0));
    Q_INT(-1, spmd_mesh_axis_size(DEAD_MESH, 0));
    Q_INT(-1, spmd_mesh_axis_size(M, -1));
    Q_INT(-1, spmd_mesh_axis_size(M, 2));
    Q_INT(-1, spmd_mesh_axis_size(M, SPMD_MAX_MESH_AXES));
    Q_INT(-1, spmd_mesh_axis_size(M, INT_MAX));
    Q_INT(-1, spmd_mesh_axis_size(M, INT_MIN));
}

void sweep_spmd_mesh_axis_name(void)
{
    fixture_up();
    Q_NULL(spmd_mesh_axis_name(NULL, 0));
    Q_NULL(spmd_mesh_axis_name(DEAD_MESH, 0));
    Q_NULL(spmd_mesh_axis_name(M, -1));
    Q_NULL(spmd_mesh_axis_name(M, 2));
    Q_NULL(spmd_mesh_axis_name(M, SPMD_MAX_MESH_AXES));
    Q_NULL(spmd_mesh_axis_name(M, INT_MAX));
    Q_NULL(spmd_mesh_axis_name(M, INT_MIN));
}

void sweep_spmd_mesh_axis_index(void)
{
    char long_name[200];
    memset(long_name, 'x', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    fixture_up();
    Q_INT(-1, spmd_mesh_axis_index(NULL, "x"));
    Q_INT(-1, spmd_mesh_axis_index(DEAD_MESH, "x"));
    Q_INT(-1, spmd_mesh_axis_index(M, NULL));
    Q_INT(-1, spmd_mesh_axis_index(M, ""));
    Q_INT(-1, spmd_mesh_axis_index(M, "z"));
    Q_INT(-1, spmd_mesh_axis_index(M, "x,y"));
    Q_INT(-1, spmd_mesh_axis_index(M, long_name));
}

void sweep_spmd_mesh_device_id(void)
{
    fixture_up();
    Q_INT(-1, spmd_mesh_device_id(NULL, 0));
    Q_INT(-1, spmd_mesh_device_id(DEAD_MESH, 0));
    Q_INT(-1, spmd_mesh_device_id(M, -1));
    Q_INT(-1, spmd_mesh_device_id(M, NDEV));
    Q_INT(-1, spmd_mesh_device_id(M, INT_MAX));
    Q_INT(-1, spmd_mesh_device_id(M, INT_MIN));
}

void sweep_spmd_mesh_device_position(void)
{
    fixture_up();
    Q_INT(-1, spmd_mesh_device_position(NULL, 0));
    Q_INT(-1, spmd_mesh_device_position(DEAD_MESH, 0));
    Q_INT(-1, spmd_mesh_device_position(M, -1));
    Q_INT(-1, spmd_mesh_device_position(M, NDEV));
    Q_INT(-1, spmd_mesh_device_position(M, INT_MAX));
    Q_INT(-1, spmd_mesh_device_position(M, INT_MIN));
    Q_INT(-1, spmd_mesh_device_position(M_SUB, 3)); /* a device outside the mesh */
}

void sweep_spmd_mesh_device_coords(void)
{
    int c[SPMD_MAX_MESH_AXES];
    fixture_up();
    BAD_KEEP(INV, c, spmd_mesh_device_coords(NULL, 0, c));
    BAD_KEEP(INV, c, spmd_mesh_device_coords(DEAD_MESH, 0, c));
    BAD(INV, spmd_mesh_device_coords(M, 0, NULL));
    BAD_KEEP(INV, c, spmd_mesh_device_coords(M, -1, c));
    BAD_KEEP(INV, c, spmd_mesh_device_coords(M, NDEV, c));
    BAD_KEEP(INV, c, spmd_mesh_device_coords(M, INT_MAX, c));
    BAD_KEEP(INV, c, spmd_mesh_device_coords(M, INT_MIN, c));
    BAD_KEEP(INV, c, spmd_mesh_device_coords(M_SUB, 3, c));
}

void sweep_spmd_mesh_num_local_devices(void)
{
    Q_INT(0, spmd_mesh_num_local_devices(NULL));
    Q_INT(0, spmd_mesh_num_local_devices(DEAD_MESH));
}

void sweep_spmd_mesh_local_device_id(void)
{
    fixture_up();
    Q_INT(-1, spmd_mesh_local_device_id(NULL, 0));
    Q_INT(-1, spmd_mesh_local_device_id(DEAD_MESH, 0));
    Q_INT(-1, spmd_mesh_local_device_id(M, -1));
    Q_INT(-1, spmd_mesh_local_device_id(M, NDEV));
    Q_INT(-1, spmd_mesh_local_device_id(M, INT_MAX));
    Q_INT(-1, spmd_mesh_local_device_id(M, INT_MIN));
}

void sweep_spmd_mesh_has_process(void)
{
    fixture_up();
    Q_INT(0, spmd_mesh_has_process(NULL, 0));
    Q_INT(0, spmd_mesh_has_process(DEAD_MESH, 0));
    Q_INT(0, spmd_mesh_has_process(M, -1));
    Q_INT(0, spmd_mesh_has_process(M, 1));
    Q_INT(0, spmd_mesh_has_process(M, INT_MAX));
    Q_INT(0, spmd_mesh_has_process(M, INT_MIN));
}

void sweep_spmd_mesh_is_contiguous(void)
{
    Q_INT(0, spmd_mesh_is_contiguous(NULL));
    Q_INT(0, spmd_mesh_is_contiguous(DEAD_MESH));
}

void sweep_spmd_mesh_check_contiguous(void)
{
    BAD(INV, spmd_mesh_check_contiguous(NULL));
    BAD(INV, spmd_mesh_check_contiguous(DEAD_MESH));
}

void sweep_spmd_mesh_local_shape(void)
{
    int shape[SPMD_MAX_MESH_AXES];
    fixture_up();
    BAD_KEEP(INV, shape, spmd_mesh_local_shape(NULL, shape));
    BAD_KEEP(INV, shape, spmd_mesh_local_shape(DEAD_MESH, shape));
    BAD(INV, spmd_mesh_local_shape(M, NULL));
}

void sweep_spmd_mesh_is_current(void)
{
    /* a mesh of an earlier runtime (spmd_finalize, then spmd_init again) */
    spmd_mesh *old = NULL;
    runtime_up();
    SETUP(spmd_mesh_create(1, (const int[]){NDEV}, ONE_I, NULL, 0, &old));
    runtime_cycle();
    fixture_up();
    Q_INT(0, spmd_mesh_is_current(NULL));
    Q_INT(0, spmd_mesh_is_current(DEAD_MESH));
    Q_INT(0, spmd_mesh_is_current(old));
    spmd_mesh_destroy(old);
}

void sweep_spmd_mesh_equal(void)
{
    fixture_up();
    Q_INT(0, spmd_mesh_equal(NULL, M));
    Q_INT(0, spmd_mesh_equal(M, NULL));
    Q_INT(0, spmd_mesh_equal(NULL, NULL));
    Q_INT(0, spmd_mesh_equal(DEAD_MESH, M));
    Q_INT(0, spmd_mesh_equal(M, DEAD_MESH));
    Q_INT(0, spmd_mesh_equal(DEAD_MESH, DEAD_MESH));
}

void sweep_spmd_mesh_format(void)
{
    char buf[64];
    fixture_up();
    BAD_KEEP(INV, buf, spmd_mesh_format(NULL, buf, sizeof buf));
    BAD_KEEP(INV, buf, spmd_mesh_format(DEAD_MESH, buf, sizeof buf));
    BAD(INV, spmd_mesh_format(M, NULL, sizeof buf));
    BAD_KEEP(INV, buf, spmd_mesh_format(M, buf, 0));
    BAD(INV, spmd_mesh_format(M, NULL, 0));
    BAD(INV, spmd_mesh_format(M, buf, 5)); /* too small: documented to truncate */
}

/* ==== spec.h ================================================================================== */

void sweep_spmd_spec_parse(void)
{
    char long_name[SPMD_MAX_AXIS_NAME + 8], sixteen[256], seventeen[256];
    snprintf(long_name, sizeof long_name, "'%0*d'", SPMD_MAX_AXIS_NAME + 1, 0);
    sixteen[0] = seventeen[0] = '\0';
    for (int i = 0; i < SPMD_MAX_RANK; i++)
        strcat(sixteen, "None,");
    snprintf(seventeen, sizeof seventeen, "%sNone", sixteen);
    BAD_OUT(spmd_spec, INV, spmd_spec_parse(NULL, &out));
    BAD(INV, spmd_spec_parse("'x'", NULL));
    BAD(INV, spmd_spec_parse(NULL, NULL));
    BAD_OUT(spmd_spec, SPC, spmd_spec_parse("(", &out));
    BAD_OUT(spmd_spec, SPC, spmd_spec_parse(")", &out));
    BAD_OUT(spmd_spec, SPC, spmd_spec_parse("'x", &out));
    BAD_OUT(spmd_spec, SPC, spmd_spec_parse("''", &out));
    BAD_OUT(spmd_spec, SPC, spmd_spec_parse("'x',,'y'", &out));
    BAD_OUT(spmd_spec, SPC, spmd_spec_parse("(('x', 'y'),)", &out));
    BAD_OUT(spmd_spec, SPC, spmd_spec_parse("'x', 'x'", &out));
    BAD_OUT(spmd_spec, SPC, spmd_spec_parse("('x', None)", &out));
    BAD_OUT(spmd_spec, SPC, spmd_spec_parse("P('x'", &out));
    BAD_OUT(spmd_spec, SPC, spmd_spec_parse("'x' 'y'", &out));
    BAD_OUT(spmd_spec, SPC, spmd_spec_parse("'a=b'", &out));
    BAD_OUT(spmd_spec, SPC, spmd_spec_parse(long_name, &out));
    BAD_OUT(spmd_spec, SPC, spmd_spec_parse(seventeen, &out));
    BAD_OUT(spmd_spec, SPC, spmd_spec_parse("('a','b','c','d','e','f','g','h','i')", &out));
}

void sweep_spmd_spec_create(void) { BAD(INV, spmd_spec_create(NULL)); }

static spmd_spec *T; /* scratch spec P('x', None) (or 16 entries), made again before each case */

static void fresh_t(const char *text)
{
    spmd_spec_destroy(T);
    T = NULL;
    SETUP(spmd_spec_parse(text, &T));
}

/* A failing append leaves the spec unchanged (documented). */
#define BAD_T(want, alt, expr)                                                                     \
    do {                                                                                           \
        int len_ = spmd_spec_length(T);                                                            \
        BAD_L(#expr, want, alt, expr);                                                             \
        if (g_case > g_skip && spmd_spec_length(T) != len_)                                        \
            case_fail("modified", "the spec changed from %d to %d entries", len_,                  \
                      spmd_spec_length(T));                                                        \
    } while (0)

void sweep_spmd_spec_append(void)
{
    const char *x[1] = {"x"}, *null1[1] = {NULL}, *empty[1] = {""}, *none[1] = {"None"};
    const char *dup[2] = {"y", "y"};
    const char *nine[9] = {"a", "b", "c", "d", "e", "f", "g", "h", "i"};
    char long_name[SPMD_MAX_AXIS_NAME + 2];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    const char *too_long[1] = {long_name};
    BAD(INV, spmd_spec_append(NULL, 1, x));
    BAD(INV, spmd_spec_append(DEAD_SPEC, 1, x));
    fresh_t("'x', None");
    BAD_T(SPC, INV, spmd_spec_append(T, -1, x));
    BAD_T(SPC, INV, spmd_spec_append(T, SPMD_MAX_MESH_AXES + 1, nine));
    BAD_T(SPC, INV, spmd_spec_append(T, INT_MAX, x));
    BAD_T(SPC, INV, spmd_spec_append(T, INT_MIN, x));
    BAD_T(INV, INV, spmd_spec_append(T, 1, NULL));
    BAD_T(SPC, INV, spmd_spec_append(T, 1, null1));
    BAD_T(SPC, SPC, spmd_spec_append(T, 1, empty));
    BAD_T(SPC, SPC, spmd_spec_append(T, 1, none));
    BAD_T(SPC, SPC, spmd_spec_append(T, 1, x)); /* 'x' is used already */
    BAD_T(SPC, SPC, spmd_spec_append(T, 2, dup));
    BAD_T(SPC, SPC, spmd_spec_append(T, 1, too_long));
    fresh_t("None, None, None, None, None, None, None, None, None, None, None, None, None, None, "
            "None, None");
    BAD_T(SPC, SPC, spmd_spec_append(T, 0, NULL)); /* a 17th entry */
    spmd_spec_destroy(T);
    T = NULL;
}

void sweep_spmd_spec_append_axis(void)
{
    char long_name[SPMD_MAX_AXIS_NAME + 2];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    BAD(INV, spmd_spec_append_axis(NULL, "x"));
    BAD(INV, spmd_spec_append_axis(DEAD_SPEC, "x"));
    fresh_t("'x', None");
    BAD_T(SPC, SPC, spmd_spec_append_axis(T, ""));
    BAD_T(SPC, SPC, spmd_spec_append_axis(T, "None"));
    BAD_T(SPC, SPC, spmd_spec_append_axis(T, "x"));
    BAD_T(SPC, SPC, spmd_spec_append_axis(T, "a,b"));
    BAD_T(SPC, SPC, spmd_spec_append_axis(T, long_name));
    fresh_t("None, None, None, None, None, None, None, None, None, None, None, None, None, None, "
            "None, None");
    BAD_T(SPC, SPC, spmd_spec_append_axis(T, NULL)); /* a 17th entry */
    spmd_spec_destroy(T);
    T = NULL;
}

void sweep_spmd_spec_copy(void)
{
    fixture_up();
    BAD_OUT(spmd_spec, INV, spmd_spec_copy(NULL, &out));
    BAD_OUT(spmd_spec, INV, spmd_spec_copy(DEAD_SPEC, &out));
    BAD(INV, spmd_spec_copy(P_XY, NULL));
}

void sweep_spmd_spec_destroy(void)
{
    Q_VOID(spmd_spec_destroy(NULL));
    Q_VOID(spmd_spec_destroy(DEAD_SPEC));
}

void sweep_spmd_spec_set_unreduced(void)
{
    const char *x[1] = {"x"}, *y[1] = {"y"}, *null1[1] = {NULL}, *empty[1] = {""};
    const char *none[1] = {"None"}, *dup[2] = {"y", "y"};
    const char *nine[9] = {"a", "b", "c", "d", "e", "f", "g", "h", "i"};
    BAD(INV, spmd_spec_set_unreduced(NULL, 1, y));
    BAD(INV, spmd_spec_set_unreduced(DEAD_SPEC, 1, y));
    fresh_t("'x', None, unreduced={'z'}");
    BAD_T(SPC, INV, spmd_spec_set_unreduced(T, -1, y));
    BAD_T(SPC, INV, spmd_spec_set_unreduced(T, SPMD_MAX_MESH_AXES + 1, nine));
    BAD_T(SPC, INV, spmd_spec_set_unreduced(T, INT_MIN, y));
    BAD_T(INV, INV, spmd_spec_set_unreduced(T, 1, NULL));
    BAD_T(SPC, INV, spmd_spec_set_unreduced(T, 1, null1));
    BAD_T(SPC, SPC, spmd_spec_set_unreduced(T, 1, empty));
    BAD_T(SPC, SPC, spmd_spec_set_unreduced(T, 1, none));
    BAD_T(SPC, SPC, spmd_spec_set_unreduced(T, 1, x)); /* 'x' partitions a dimension */
    BAD_T(SPC, SPC, spmd_spec_set_unreduced(T, 2, dup));
    if (g_case > g_skip && spmd_spec_unreduced_size(T) != 1)
        case_fail("modified", "a refused call changed the unreduced axes");
    spmd_spec_destroy(T);
    T = NULL;
}

void sweep_spmd_spec_unreduced_size(void)
{
    Q_INT(-1, spmd_spec_unreduced_size(NULL));
    Q_INT(-1, spmd_spec_unreduced_size(DEAD_SPEC));
}

void sweep_spmd_spec_unreduced_axis(void)
{
    fixture_up();
    Q_NULL(spmd_spec_unreduced_axis(NULL, 0));
    Q_NULL(spmd_spec_unreduced_axis(DEAD_SPEC, 0));
    Q_NULL(spmd_spec_unreduced_axis(P_XY, 0)); /* none */
    Q_NULL(spmd_spec_unreduced_axis(P_XY, -1));
    Q_NULL(spmd_spec_unreduced_axis(P_XY, INT_MAX));
    Q_NULL(spmd_spec_unreduced_axis(P_XY, INT_MIN));
}

void sweep_spmd_spec_length(void)
{
    Q_INT(-1, spmd_spec_length(NULL));
    Q_INT(-1, spmd_spec_length(DEAD_SPEC));
}

void sweep_spmd_spec_entry_size(void)
{
    fixture_up();
    Q_INT(-1, spmd_spec_entry_size(NULL, 0));
    Q_INT(-1, spmd_spec_entry_size(DEAD_SPEC, 0));
    Q_INT(-1, spmd_spec_entry_size(P_XY, -1));
    Q_INT(-1, spmd_spec_entry_size(P_XY, 2));
    Q_INT(-1, spmd_spec_entry_size(P_XY, INT_MAX));
    Q_INT(-1, spmd_spec_entry_size(P_XY, INT_MIN));
}

void sweep_spmd_spec_entry_axis(void)
{
    fixture_up();
    Q_NULL(spmd_spec_entry_axis(NULL, 0, 0));
    Q_NULL(spmd_spec_entry_axis(DEAD_SPEC, 0, 0));
    Q_NULL(spmd_spec_entry_axis(P_XY, -1, 0));
    Q_NULL(spmd_spec_entry_axis(P_XY, 2, 0));
    Q_NULL(spmd_spec_entry_axis(P_XY, INT_MAX, 0));
    Q_NULL(spmd_spec_entry_axis(P_XY, INT_MIN, 0));
    Q_NULL(spmd_spec_entry_axis(P_XY, 0, -1));
    Q_NULL(spmd_spec_entry_axis(P_XY, 0, 1));
    Q_NULL(spmd_spec_entry_axis(P_XY, 0, INT_MAX));
    Q_NULL(spmd_spec_entry_axis(P_XY, 0, INT_MIN));
}

void sweep_spmd_spec_is_equivalent(void)
{
    fixture_up();
    Q_INT(0, spmd_spec_is_equivalent(NULL, P_XY));
    Q_INT(0, spmd_spec_is_equivalent(P_XY, NULL));
    Q_INT(0, spmd_spec_is_equivalent(NULL, NULL));
    Q_INT(0, spmd_spec_is_equivalent(DEAD_SPEC, P_REP));
    Q_INT(0, spmd_spec_is_equivalent(P_REP, DEAD_SPEC));
}

void sweep_spmd_spec_format(void)
{
    char buf[64];
    fixture_up();
    BAD_KEEP(INV, buf, spmd_spec_format(NULL, buf, sizeof buf));
    BAD_KEEP(INV, buf, spmd_spec_format(DEAD_SPEC, buf, sizeof buf));
    BAD(INV, spmd_spec_format(P_XY, NULL, sizeof buf));
    BAD_KEEP(INV, buf, spmd_spec_format(P_XY, buf, 0));
    BAD(INV, spmd_spec_format(P_XY, buf, 4)); /* too small: documented to truncate */
}

/* ==== sharding.h ============================================================================== */

void sweep_spmd_sharding_create(void)
{
    fixture_up();
    BAD_OUT(spmd_sharding, INV, spmd_sharding_create(NULL, P_XY, &out));
    BAD_OUT(spmd_sharding, INV, spmd_sharding_create(DEAD_MESH, P_XY, &out));
    BAD_OUT(spmd_sharding, INV, spmd_sharding_create(M, NULL, &out));
    BAD_OUT(spmd_sharding, INV, spmd_sharding_create(M, DEAD_SPEC, &out));
    BAD(INV, spmd_sharding_create(M, P_XY, NULL));
    BAD_OUT(spmd_sharding, SPC, spmd_sharding_create(M, P_Z, &out));
    BAD_OUT(spmd_sharding, SPC, spmd_sharding_create(M_SUB, P_XY, &out));
}

void sweep_spmd_sharding_create_parse(void)
{
    fixture_up();
    BAD_OUT(spmd_sharding, INV, spmd_sharding_create_parse(NULL, "'x'", &out));
    BAD_OUT(spmd_sharding, INV, spmd_sharding_create_parse(DEAD_MESH, "'x'", &out));
    BAD_OUT(spmd_sharding, INV, spmd_sharding_create_parse(M, NULL, &out));
    BAD(INV, spmd_sharding_create_parse(M, "'x'", NULL));
    BAD_OUT(spmd_sharding, SPC, spmd_sharding_create_parse(M, "('x'", &out));
    BAD_OUT(spmd_sharding, SPC, spmd_sharding_create_parse(M, "'z'", &out));
    BAD_OUT(spmd_sharding, SPC, spmd_sharding_create_parse(M, "'x', 'x'", &out));
}

void sweep_spmd_sharding_retain(void)
{
    Q_NULL(spmd_sharding_retain(NULL));
    Q_PTR(g_dead, spmd_sharding_retain(DEAD_SHARDING));
}

void sweep_spmd_sharding_destroy(void)
{
    Q_VOID(spmd_sharding_destroy(NULL));
    Q_VOID(spmd_sharding_destroy(DEAD_SHARDING));
}

void sweep_spmd_sharding_mesh(void)
{
    Q_NULL(spmd_sharding_mesh(NULL));
    Q_NULL(spmd_sharding_mesh(DEAD_SHARDING));
}

void sweep_spmd_sharding_spec(void)
{
    Q_NULL(spmd_sharding_spec(NULL));
    Q_NULL(spmd_sharding_spec(DEAD_SHARDING));
}

void sweep_spmd_sharding_check_shape(void)
{
    fixture_up();
    BAD(INV, spmd_sharding_check_shape(NULL, 2, S44));
    BAD(INV, spmd_sharding_check_shape(DEAD_SHARDING, 2, S44));
    BAD(SHP, spmd_sharding_check_shape(S_XY, -1, S44));
    BAD(SHP, spmd_sharding_check_shape(S_XY, SPMD_MAX_RANK + 1, S17));
    BAD(SHP, spmd_sharding_check_shape(S_XY, INT_MAX, S44));
    BAD(SHP, spmd_sharding_check_shape(S_XY, INT_MIN, S44));
    BAD(INV, spmd_sharding_check_shape(S_XY, 2, NULL));
    BAD(SHP, spmd_sharding_check_shape(S_XY, 1, S4));
    BAD(SHP, spmd_sharding_check_shape(S_XY, 2, S04));
    BAD(SHP, spmd_sharding_check_shape(S_XY, 2, S4N));
    BAD(SHP, spmd_sharding_check_shape(S_XY, 2, SMIN));
    BAD(SHP, spmd_sharding_check_shape(S_XY, 2, S34));
    BAD(SHP, spmd_sharding_check_shape(S_REP, 2, SMAX));
}

void sweep_spmd_sharding_shard_shape(void)
{
    int64_t out[SPMD_MAX_RANK + 1];
    fixture_up();
    BAD_KEEP(INV, out, spmd_sharding_shard_shape(NULL, 2, S44, out));
    BAD_KEEP(INV, out, spmd_sharding_shard_shape(DEAD_SHARDING, 2, S44, out));
    BAD_KEEP(SHP, out, spmd_sharding_shard_shape(S_XY, -1, S44, out));
    BAD_KEEP(SHP, out, spmd_sharding_shard_shape(S_XY, SPMD_MAX_RANK + 1, S17, out));
    BAD_KEEP(SHP, out, spmd_sharding_shard_shape(S_XY, INT_MAX, S44, out));
    BAD_KEEP(SHP, out, spmd_sharding_shard_shape(S_XY, INT_MIN, S44, out));
    BAD_KEEP(INV, out, spmd_sharding_shard_shape(S_XY, 2, NULL, out));
    BAD(INV, spmd_sharding_shard_shape(S_XY, 2, S44, NULL));
    BAD_KEEP(SHP, out, spmd_sharding_shard_shape(S_XY, 1, S4, out));
    BAD_KEEP(SHP, out, spmd_sharding_shard_shape(S_XY, 2, S04, out));
    BAD_KEEP(SHP, out, spmd_sharding_shard_shape(S_XY, 2, SMIN, out));
    BAD_KEEP(SHP, out, spmd_sharding_shard_shape(S_XY, 2, S34, out));
}

void sweep_spmd_sharding_num_blocks(void)
{
    fixture_up();
    Q_INT(-1, spmd_sharding_num_blocks(NULL, 0));
    Q_INT(-1, spmd_sharding_num_blocks(DEAD_SHARDING, 0));
    Q_INT(-1, spmd_sharding_num_blocks(S_XY, -1));
    Q_INT(-1, spmd_sharding_num_blocks(S_XY, SPMD_MAX_RANK));
    Q_INT(-1, spmd_sharding_num_blocks(S_XY, INT_MAX));
    Q_INT(-1, spmd_sharding_num_blocks(S_XY, INT_MIN));
}

void sweep_spmd_sharding_device_box(void)
{
    spmd_box box;
    fixture_up();
    BAD_KEEP(INV, box, spmd_sharding_device_box(NULL, 2, S44, 0, &box));
    BAD_KEEP(INV, box, spmd_sharding_device_box(DEAD_SHARDING, 2, S44, 0, &box));
    BAD(INV, spmd_sharding_device_box(S_XY, 2, S44, 0, NULL));
    BAD_KEEP(INV, box, spmd_sharding_device_box(S_XY, 2, S44, -1, &box));
    BAD_KEEP(INV, box, spmd_sharding_device_box(S_XY, 2, S44, NDEV, &box));
    BAD_KEEP(INV, box, spmd_sharding_device_box(S_XY, 2, S44, INT_MAX, &box));
    BAD_KEEP(INV, box, spmd_sharding_device_box(S_XY, 2, S44, INT_MIN, &box));
    BAD_KEEP(INV, box, spmd_sharding_device_box(S_SUB, 1, S4, 3, &box));
    BAD_KEEP(SHP, box, spmd_sharding_device_box(S_XY, -1, S44, 0, &box));
    BAD_KEEP(SHP, box, spmd_sharding_device_box(S_XY, INT_MAX, S44, 0, &box));
    BAD_KEEP(SHP, box, spmd_sharding_device_box(S_XY, 1, S4, 0, &box));
    BAD_KEEP(INV, box, spmd_sharding_device_box(S_XY, 2, NULL, 0, &box));
    BAD_KEEP(SHP, box, spmd_sharding_device_box(S_XY, 2, S34, 0, &box));
    BAD_KEEP(SHP, box, spmd_sharding_device_box(S_XY, 2, S04, 0, &box));
}

void sweep_spmd_sharding_replica_id(void)
{
    fixture_up();
    Q_INT(-1, spmd_sharding_replica_id(NULL, 0));
    Q_INT(-1, spmd_sharding_replica_id(DEAD_SHARDING, 0));
    Q_INT(-1, spmd_sharding_replica_id(S_XY, -1));
    Q_INT(-1, spmd_sharding_replica_id(S_XY, NDEV));
    Q_INT(-1, spmd_sharding_replica_id(S_XY, INT_MAX));
    Q_INT(-1, spmd_sharding_replica_id(S_XY, INT_MIN));
    Q_INT(-1, spmd_sharding_replica_id(S_SUB, 3));
}

void sweep_spmd_sharding_num_devices(void)
{
    Q_INT(0, spmd_sharding_num_devices(NULL));
    Q_INT(0, spmd_sharding_num_devices(DEAD_SHARDING));
}

void sweep_spmd_sharding_num_addressable_devices(void)
{
    Q_INT(0, spmd_sharding_num_addressable_devices(NULL));
    Q_INT(0, spmd_sharding_num_addressable_devices(DEAD_SHARDING));
}

void sweep_spmd_sharding_addressable_device_id(void)
{
    fixture_up();
    Q_INT(-1, spmd_sharding_addressable_device_id(NULL, 0));
    Q_INT(-1, spmd_sharding_addressable_device_id(DEAD_SHARDING, 0));
    Q_INT(-1, spmd_sharding_addressable_device_id(S_XY, -1));
    Q_INT(-1, spmd_sharding_addressable_device_id(S_XY, NDEV));
    Q_INT(-1, spmd_sharding_addressable_device_id(S_XY, INT_MAX));
    Q_INT(-1, spmd_sharding_addressable_device_id(S_XY, INT_MIN));
}

void sweep_spmd_sharding_is_fully_addressable(void)
{
    Q_INT(0, spmd_sharding_is_fully_addressable(NULL));
    Q_INT(0, spmd_sharding_is_fully_addressable(DEAD_SHARDING));
}

void sweep_spmd_sharding_is_fully_replicated(void)
{
    Q_INT(0, spmd_sharding_is_fully_replicated(NULL));
    Q_INT(0, spmd_sharding_is_fully_replicated(DEAD_SHARDING));
}

void sweep_spmd_sharding_is_equivalent(void)
{
    fixture_up();
    Q_INT(0, spmd_sharding_is_equivalent(NULL, S_XY, 2));
    Q_INT(0, spmd_sharding_is_equivalent(S_XY, NULL, 2));
    Q_INT(0, spmd_sharding_is_equivalent(DEAD_SHARDING, S_XY, 2));
    Q_INT(0, spmd_sharding_is_equivalent(S_XY, DEAD_SHARDING, 2));
    Q_INT(0, spmd_sharding_is_equivalent(S_XY, S_XY, -1));
    Q_INT(0, spmd_sharding_is_equivalent(S_XY, S_XY, 1)); /* below the spec's length */
    Q_INT(0, spmd_sharding_is_equivalent(S_REP, S_REP, SPMD_MAX_RANK + 1));
    Q_INT(0, spmd_sharding_is_equivalent(S_REP, S_REP, INT_MAX));
    Q_INT(0, spmd_sharding_is_equivalent(S_REP, S_REP, INT_MIN));
}

void sweep_spmd_sharding_format(void)
{
    char buf[128];
    fixture_up();
    BAD_KEEP(INV, buf, spmd_sharding_format(NULL, buf, sizeof buf));
    BAD_KEEP(INV, buf, spmd_sharding_format(DEAD_SHARDING, buf, sizeof buf));
    BAD(INV, spmd_sharding_format(S_XY, NULL, sizeof buf));
    BAD_KEEP(INV, buf, spmd_sharding_format(S_XY, buf, 0));
    BAD(INV, spmd_sharding_format(S_XY, buf, 10)); /* too small: documented to truncate */
}

static FILE *g_vis; /* spmd_visualize_sharding's output, emptied before each case */

/* A failing spmd_visualize_sharding draws nothing. */
#define BAD_VIS(want, alt, expr)                                                                   \
    do {                                                                                           \
        if (g_vis)                                                                                 \
            rewind(g_vis);                                                                         \
        BAD_L(#expr, want, alt, expr);                                                             \
        if (g_case > g_skip && g_vis && ftell(g_vis) != 0)                                         \
            case_fail("modified", "failed but wrote %ld bytes", ftell(g_vis));                     \
    } while (0)

void sweep_spmd_visualize_sharding(void)
{
    fixture_up();
    g_vis = tmpfile();
    if (!g_vis)
        die("tmpfile", SPMD_ERR_INTERNAL);
    BAD_VIS(INV, INV, spmd_visualize_sharding(NULL, S_XY, 2, S44));
    BAD_VIS(INV, INV, spmd_visualize_sharding(g_vis, NULL, 2, S44));
    BAD_VIS(INV, INV, spmd_visualize_sharding(g_vis, DEAD_SHARDING, 2, S44));
    BAD_VIS(UNS, UNS, spmd_visualize_sharding(g_vis, S_REP, 0, NULL));
    BAD_VIS(UNS, UNS, spmd_visualize_sharding(g_vis, S_XY, 3, (const int64_t[]){4, 4, 4}));
    BAD_VIS(UNS, SHP, spmd_visualize_sharding(g_vis, S_XY, -1, S44));
    BAD_VIS(UNS, SHP, spmd_visualize_sharding(g_vis, S_XY, INT_MAX, S44));
    BAD_VIS(UNS, SHP, spmd_visualize_sharding(g_vis, S_XY, INT_MIN, S44));
    BAD_VIS(INV, INV, spmd_visualize_sharding(g_vis, S_XY, 2, NULL));
    BAD_VIS(SHP, SHP, spmd_visualize_sharding(g_vis, S_XY, 1, S4));
    BAD_VIS(SHP, SHP, spmd_visualize_sharding(g_vis, S_XY, 2, S34));
    BAD_VIS(SHP, SHP, spmd_visualize_sharding(g_vis, S_XY, 2, S04));
    BAD_VIS(SHP, SHP, spmd_visualize_sharding(g_vis, S_XY, 2, SMIN));
    fclose(g_vis);
    g_vis = NULL;
}
