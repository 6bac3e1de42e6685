// hosttest runs the kernels' arithmetic (common.h) on the CPU, for
// TestKernelLogic, which compares it with Go's crypto/aes and
// crypto/sha256. It reads one request per line on stdin and answers each
// with one line of hex:
//
//	aes RK(60 words, hex, big-endian) FIRST NBLOCKS   keystream blocks
//	leaf HEX(256 bytes)                                Merkle leaf hash
//	node HEX(64 bytes)                                 Merkle node hash
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../common.h"

static int unhex(const char *s, u8 *out, int n) {
	for (int i = 0; i < n; i++) {
		unsigned v;
		if (sscanf(s + 2 * i, "%2x", &v) != 1) return -1;
		out[i] = (u8)v;
	}
	return 0;
}

static void put_digest(const u32 h[8]) {
	for (int i = 0; i < 8; i++) printf("%08x", h[i]);
	printf("\n");
}

int main(void) {
	static char line[1 << 16];
	const u8 s[256] = AES_SBOX_INIT;
	u32 sbox[256], te0[256];
	for (int i = 0; i < 256; i++) {
		sbox[i] = s[i];
		te0[i] = aes_te0(s[i]);
	}
	while (fgets(line, sizeof line, stdin)) {
		char op[8], arg[1 << 15];
		if (sscanf(line, "%7s %32767s", op, arg) != 2) return 2;
		if (strcmp(op, "aes") == 0) {
			u8 raw[240];
			u32 rk[60];
			unsigned long long first, n;
			if (unhex(arg, raw, 240) || sscanf(line + 4 + 480, "%llu %llu", &first, &n) != 2) return 2;
			for (int i = 0; i < 60; i++) rk[i] = (u32)raw[4 * i] << 24 | (u32)raw[4 * i + 1] << 16 | (u32)raw[4 * i + 2] << 8 | raw[4 * i + 3];
			for (unsigned long long b = 0; b < n; b++) {
				u32 w[4];
				aes_ctr_block(te0, sbox, rk, first + b, w);
				for (int i = 0; i < 4; i++)
					for (int j = 0; j < 4; j++) printf("%02x", (w[i] >> (8 * j)) & 0xff);
			}
			printf("\n");
		} else if (strcmp(op, "leaf") == 0) {
			u8 raw[256];
			u32 e[64], h[8];
			if (unhex(arg, raw, 256)) return 2;
			memcpy(e, raw, 256); // little-endian host, as on the GPU
			sha256_leaf(e, h);
			put_digest(h);
		} else if (strcmp(op, "node") == 0) {
			u8 raw[64];
			u32 lr[16], h[8];
			if (unhex(arg, raw, 64)) return 2;
			for (int i = 0; i < 16; i++) lr[i] = (u32)raw[4 * i] << 24 | (u32)raw[4 * i + 1] << 16 | (u32)raw[4 * i + 2] << 8 | raw[4 * i + 3];
			sha256_node(lr, h);
			put_digest(h);
		} else {
			return 2;
		}
		fflush(stdout);
	}
	return 0;
}
