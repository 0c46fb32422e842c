/*
 * Host reference for examples/data_parallel_mlp: the same 4-16-2 relu MLP, initial
 * parameters and dataset (same generator), trained by full-batch SGD in double precision with
 * plain loops, one process, no devices and no libspmd. The data-parallel mean of the devices'
 * gradients over equal shares of the batch is the full-batch gradient, so the example's losses
 * must match these within float32 rounding. Prints "step k loss=..." and the final parameters'
 * sum of squares.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

enum { D_IN = 4, HIDDEN = 16, D_OUT = 2, BATCH = 64, STEPS = 10 };
#define LEARNING_RATE 0.05

static uint64_t rng_state = 0;

static double uniform(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

static double normal(void) /* Irwin-Hall: sum of 12 uniforms - 6 */
{
    double s = 0;
    for (int k = 0; k < 12; k++)
        s += uniform();
    return s - 6.0;
}

/* The example stores its parameters and data as float32: round them the same way. */
static double f32(double v) { return (double)(float)v; }

static double w1[D_IN][HIDDEN], b1[HIDDEN], w2[HIDDEN][D_OUT], b2[D_OUT];
static double x[BATCH][D_IN], y[BATCH][D_OUT];

int main(void)
{
    for (int i = 0; i < D_IN; i++)
        for (int j = 0; j < HIDDEN; j++)
            w1[i][j] = f32(normal() / 2.0);
    for (int j = 0; j < HIDDEN; j++)
        b1[j] = f32(normal());
    for (int j = 0; j < HIDDEN; j++)
        for (int k = 0; k < D_OUT; k++)
            w2[j][k] = f32(normal() / 4.0);
    for (int k = 0; k < D_OUT; k++)
        b2[k] = f32(normal());
    for (int n = 0; n < BATCH; n++)
        for (int i = 0; i < D_IN; i++)
            x[n][i] = f32(2.0 * uniform() - 1.0);
    for (int n = 0; n < BATCH; n++) {
        y[n][0] = f32(fabs(x[n][0] - x[n][1]));
        y[n][1] = f32(x[n][2] - 0.5 * x[n][3] + 0.25);
    }

    for (int step = 0; step < STEPS; step++) {
        double gw1[D_IN][HIDDEN] = {{0}}, gb1[HIDDEN] = {0}, gw2[HIDDEN][D_OUT] = {{0}};
        double gb2[D_OUT] = {0}, loss = 0;
        for (int n = 0; n < BATCH; n++) {
            double z[HIDDEN], h[HIDDEN], d[D_OUT], dz[HIDDEN];
            for (int j = 0; j < HIDDEN; j++) {
                z[j] = b1[j];
                for (int i = 0; i < D_IN; i++)
                    z[j] += x[n][i] * w1[i][j];
                h[j] = z[j] > 0 ? z[j] : 0;
            }
            for (int k = 0; k < D_OUT; k++) {
                double p = b2[k];
                for (int j = 0; j < HIDDEN; j++)
                    p += h[j] * w2[j][k];
                d[k] = p - y[n][k];
                loss += d[k] * d[k] / BATCH;
                d[k] *= 2.0 / BATCH; /* d loss / d prediction */
            }
            for (int j = 0; j < HIDDEN; j++) {
                dz[j] = 0;
                for (int k = 0; k < D_OUT; k++) {
                    gw2[j][k] += h[j] * d[k];
                    dz[j] += d[k] * w2[j][k];
                }
                if (!(z[j] > 0))
                    dz[j] = 0;
                gb1[j] += dz[j];
                for (int i = 0; i < D_IN; i++)
                    gw1[i][j] += x[n][i] * dz[j];
            }
            for (int k = 0; k < D_OUT; k++)
                gb2[k] += d[k];
        }
        printf("step %d loss=%.9g\n", step, loss);
        for (int i = 0; i < D_IN; i++)
            for (int j = 0; j < HIDDEN; j++)
                w1[i][j] -= LEARNING_RATE * gw1[i][j];
        for (int j = 0; j < HIDDEN; j++) {
            b1[j] -= LEARNING_RATE * gb1[j];
            for (int k = 0; k < D_OUT; k++)
                w2[j][k] -= LEARNING_RATE * gw2[j][k];
        }
        for (int k = 0; k < D_OUT; k++)
            b2[k] -= LEARNING_RATE * gb2[k];
    }
    double norm2 = 0;
    for (int j = 0; j < HIDDEN; j++) {
        for (int i = 0; i < D_IN; i++)
            norm2 += w1[i][j] * w1[i][j];
        for (int k = 0; k < D_OUT; k++)
            norm2 += w2[j][k] * w2[j][k];
        norm2 += b1[j] * b1[j];
    }
    for (int k = 0; k < D_OUT; k++)
        norm2 += b2[k] * b2[k];
    printf("final param_sumsq=%.9g\n", norm2);
    return 0;
}
