/*
 * SHA-256 over a generated buffer: an integer kernel (32-bit adds, rotates,
 * boolean functions) for the wasm benchmark's LLVM-compiled guests, next to
 * the mandelbrot kernel's float64 chain. Args: MIB [ROUNDS]. It fills MIB
 * MiB with a fixed xorshift64 stream, hashes the buffer ROUNDS times (each
 * round's digest goes into the buffer's first 32 bytes before the next
 * round), and writes the last digest, in hex, to /out/sha256.txt. The same
 * stream and hash in Go's crypto/sha256 give the same digest (see the wasm
 * benchmark's tests). Build with build.sh: clang -O2 -ffp-contract=off, for
 * wasm32-wasi and natively.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

/* block hashes one 64-byte block into h. */
static void block(uint32_t h[8], const unsigned char *p) {
	uint32_t w[64];
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 64; i++) {
		uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
	for (int i = 0; i < 64; i++) {
		uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
		uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
		hh = g;
		g = f;
		f = e;
		e = d + t1;
		d = c;
		c = b;
		b = a;
		a = t1 + t2;
	}
	h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
}

/* sha256 writes the SHA-256 of p[0:n] to out. */
static void sha256(const unsigned char *p, size_t n, unsigned char out[32]) {
	uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
	size_t i = 0;
	for (; i + 64 <= n; i += 64)
		block(h, p + i);
	unsigned char tail[128] = {0};
	size_t rest = n - i;
	memcpy(tail, p + i, rest);
	tail[rest] = 0x80;
	size_t tn = rest + 9 <= 64 ? 64 : 128;
	uint64_t bits = (uint64_t)n * 8;
	for (int j = 0; j < 8; j++)
		tail[tn - 1 - j] = (unsigned char)(bits >> (8 * j));
	for (size_t j = 0; j < tn; j += 64)
		block(h, tail + j);
	for (int j = 0; j < 8; j++) {
		out[4 * j] = (unsigned char)(h[j] >> 24);
		out[4 * j + 1] = (unsigned char)(h[j] >> 16);
		out[4 * j + 2] = (unsigned char)(h[j] >> 8);
		out[4 * j + 3] = (unsigned char)h[j];
	}
}

static int arg(int argc, char **argv, int i, int def, int max, const char *name) {
	if (i >= argc)
		return def;
	char *end;
	long v = strtol(argv[i], &end, 10);
	if (*end != 0 || v < 1 || v > max) {
		fprintf(stderr, "sha256: %s %s: want a whole number from 1 to %d\n", name, argv[i], max);
		exit(2);
	}
	return (int)v;
}

int main(int argc, char **argv) {
	const char *out = "/out/sha256.txt";
	int a = 1;
	if (argc > 2 && strcmp(argv[1], "-out") == 0) {
		out = argv[2];
		a = 3;
	}
	if (argc - a > 2) {
		fprintf(stderr, "usage: sha256 [-out FILE] [MIB [ROUNDS]]\n");
		return 2;
	}
	int mib = arg(argc, argv, a, 16, 1024, "MiB"), rounds = arg(argc, argv, a + 1, 4, 1000, "rounds");
	size_t n = (size_t)mib << 20;
	unsigned char *buf = malloc(n);
	if (!buf) {
		fprintf(stderr, "sha256: out of memory\n");
		return 1;
	}
	uint64_t x = 0x9e3779b97f4a7c15u; /* xorshift64, little-endian bytes */
	for (size_t i = 0; i < n; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		for (int j = 0; j < 8; j++)
			buf[i + j] = (unsigned char)(x >> (8 * j));
	}
	unsigned char sum[32];
	for (int r = 0; r < rounds; r++) {
		sha256(buf, n, sum);
		memcpy(buf, sum, 32);
	}
	if (strcmp(out, "/out/sha256.txt") == 0)
		mkdir("/out", 0755);
	FILE *f = fopen(out, "w");
	if (!f) {
		perror("sha256: open output");
		return 1;
	}
	for (int j = 0; j < 32; j++)
		fprintf(f, "%02x", sum[j]);
	fprintf(f, "\n");
	if (fclose(f) != 0) {
		perror("sha256: write output");
		return 1;
	}
	printf("sha256 (C): %d MiB, %d rounds\n", mib, rounds);
	return 0;
}
