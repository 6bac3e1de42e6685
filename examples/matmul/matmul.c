/*
 * A float32 matrix multiply, C = A × B for N×N matrices, the inner loop of
 * dense ML layers: a vectorizable kernel for the wasm benchmark's
 * LLVM-compiled guests, next to the mandelbrot kernel's float64 chain and
 * SHA-256's integer rounds. Args: N [REPS]. A and B come from a fixed
 * linear congruential stream; the product is computed REPS times (each
 * time from scratch, so every rep is the same work) and written to
 * /out/matmul.bin: N*N float32s, little-endian, row by row. Each element is
 * summed in the same order (k = 0, 1, ...) however the loop is vectorized,
 * and with -ffp-contract=off there is no fused multiply-add, so every build
 * writes the same bytes. Build with build.sh: clang -O2 -ffp-contract=off,
 * for wasm32-wasi (with 128-bit SIMD, like x86-64's SSE2 baseline) and
 * natively.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* matmul sets c to a × b, all n×n, row-major. */
static void matmul(int n, float *restrict c, const float *restrict a, const float *restrict b) {
	memset(c, 0, (size_t)n * n * sizeof *c);
	for (int i = 0; i < n; i++) {
		float *ci = c + (size_t)i * n;
		for (int k = 0; k < n; k++) {
			float aik = a[(size_t)i * n + k];
			const float *bk = b + (size_t)k * n;
			for (int j = 0; j < n; j++)
				ci[j] += aik * bk[j];
		}
	}
}

static int arg(int argc, char **argv, int i, int def, int max, const char *name) {
	if (i >= argc)
		return def;
	char *end;
	long v = strtol(argv[i], &end, 10);
	if (*end != 0 || v < 1 || v > max) {
		fprintf(stderr, "matmul: %s %s: want a whole number from 1 to %d\n", name, argv[i], max);
		exit(2);
	}
	return (int)v;
}

int main(int argc, char **argv) {
	const char *out = "/out/matmul.bin";
	int a = 1;
	if (argc > 2 && strcmp(argv[1], "-out") == 0) {
		out = argv[2];
		a = 3;
	}
	if (argc - a > 2) {
		fprintf(stderr, "usage: matmul [-out FILE] [N [REPS]]\n");
		return 2;
	}
	int n = arg(argc, argv, a, 512, 4096, "N"), reps = arg(argc, argv, a + 1, 1, 1000, "reps");
	size_t nn = (size_t)n * n;
	float *ma = malloc(nn * sizeof *ma), *mb = malloc(nn * sizeof *mb), *mc = malloc(nn * sizeof *mc);
	if (!ma || !mb || !mc) {
		fprintf(stderr, "matmul: out of memory\n");
		return 1;
	}
	uint32_t x = 12345; /* values in [-1, 1) in steps of 2^-23, exact in float32 */
	for (size_t i = 0; i < nn; i++) {
		x = x * 1664525u + 1013904223u;
		ma[i] = (float)((int32_t)(x >> 8) - (1 << 23)) / (float)(1 << 23);
	}
	for (size_t i = 0; i < nn; i++) {
		x = x * 1664525u + 1013904223u;
		mb[i] = (float)((int32_t)(x >> 8) - (1 << 23)) / (float)(1 << 23);
	}
	for (int r = 0; r < reps; r++)
		matmul(n, mc, ma, mb);
	if (strcmp(out, "/out/matmul.bin") == 0)
		mkdir("/out", 0755);
	FILE *f = fopen(out, "wb");
	if (!f) {
		perror("matmul: open output");
		return 1;
	}
	/* Little-endian on both targets (x86-64 and wasm32). */
	if (fwrite(mc, sizeof *mc, nn, f) != nn || fclose(f) != 0) {
		perror("matmul: write output");
		return 1;
	}
	printf("matmul (C): %dx%d float32, %d reps\n", n, n, reps);
	return 0;
}
