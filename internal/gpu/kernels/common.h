// Shared by the CUDA kernels (kernels.cu) and the host test harness
// (testdata/hosttest.c, compiled with the system's C compiler by TestKernelLogic):
// the parts of the kernels that are plain arithmetic, so that they can be
// checked against Go's crypto/aes and crypto/sha256 on a machine without
// a GPU.
#ifndef GPUNET_COMMON_H
#define GPUNET_COMMON_H

typedef unsigned int u32;
typedef unsigned long long u64;
typedef unsigned char u8;

#ifdef __CUDA__
#define FN __attribute__((device)) static inline __attribute__((always_inline))
#else
#define FN static inline
#endif

FN u32 rotr32(u32 x, int n) { return (x >> n) | (x << (32 - n)); }
FN u32 bswap32(u32 x) {
	return (x >> 24) | ((x >> 8) & 0xff00u) | ((x << 8) & 0xff0000u) | (x << 24);
}

// ---- SHA-256 (FIPS 180-4) ----

FN void sha256_init(u32 h[8]) {
	h[0] = 0x6a09e667u; h[1] = 0xbb67ae85u; h[2] = 0x3c6ef372u; h[3] = 0xa54ff53au;
	h[4] = 0x510e527fu; h[5] = 0x9b05688cu; h[6] = 0x1f83d9abu; h[7] = 0x5be0cd19u;
}

// sha256_block compresses one 64-byte block given as 16 big-endian words.
FN void sha256_block(u32 h[8], u32 w[16]) {
	const u32 k[64] = {
		0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u, 0xab1c5ed5u,
		0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu, 0x9bdc06a7u, 0xc19bf174u,
		0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu, 0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau,
		0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u, 0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u,
		0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu, 0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u,
		0xa2bfe8a1u, 0xa81a664bu, 0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u,
		0x19a4c116u, 0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
		0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u, 0xc67178f2u,
	};
	u32 a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
#ifdef __CUDA__
#pragma unroll
#endif
	for (int t = 0; t < 64; t++) {
		u32 wt;
		if (t < 16) {
			wt = w[t];
		} else {
			u32 w15 = w[(t - 15) & 15], w2 = w[(t - 2) & 15];
			u32 s0 = rotr32(w15, 7) ^ rotr32(w15, 18) ^ (w15 >> 3);
			u32 s1 = rotr32(w2, 17) ^ rotr32(w2, 19) ^ (w2 >> 10);
			wt = w[t & 15] + s0 + w[(t - 7) & 15] + s1;
			w[t & 15] = wt;
		}
		u32 S1 = rotr32(e, 6) ^ rotr32(e, 11) ^ rotr32(e, 25);
		u32 ch = (e & f) ^ (~e & g);
		u32 t1 = hh + S1 + ch + k[t] + wt;
		u32 S0 = rotr32(a, 2) ^ rotr32(a, 13) ^ rotr32(a, 22);
		u32 mj = (a & b) ^ (a & c) ^ (b & c);
		u32 t2 = S0 + mj;
		hh = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
	}
	h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

// A Merkle leaf is SHA-256(0x00 ‖ 64 int32 little-endian) and a node
// SHA-256(0x01 ‖ left ‖ right): a one-byte prefix, then a payload of whole
// 32-bit words. With P[t] the payload's word t read big-endian, message
// word t is (P[t-1] & 0xff) << 24 | P[t] >> 8, P[-1] being the prefix: the
// payload shifted by one byte. Then the 0x80 padding byte, zeros, and the
// length in bits.

// sha256_leaf hashes a leaf of 64 entries (e, as they lie in memory).
FN void sha256_leaf(const u32 *e, u32 out[8]) {
	u32 h[8], w[16];
	sha256_init(h);
	u32 prev = 0; // the prefix 0x00
	for (int blk = 0; blk < 5; blk++) {
#ifdef __CUDA__
#pragma unroll
#endif
		for (int i = 0; i < 16; i++) {
			int t = blk * 16 + i;
			u32 v;
			if (t < 64) {
				u32 p = bswap32(e[t]);
				v = (prev << 24) | (p >> 8);
				prev = p & 0xffu;
			} else if (t == 64) {
				v = (prev << 24) | 0x00800000u;
			} else if (t == 79) {
				v = 257u * 8u;
			} else {
				v = 0;
			}
			w[i] = v;
		}
		sha256_block(h, w);
	}
#ifdef __CUDA__
#pragma unroll
#endif
	for (int i = 0; i < 8; i++) out[i] = h[i];
}

// sha256_node hashes an inner node from its children's digests, 8
// big-endian words each, left then right (all zero for an empty subtree).
FN void sha256_node(const u32 lr[16], u32 out[8]) {
	u32 h[8], w[16];
	sha256_init(h);
	u32 prev = 1; // the prefix 0x01
#ifdef __CUDA__
#pragma unroll
#endif
	for (int blk = 0; blk < 2; blk++) {
#ifdef __CUDA__
#pragma unroll
#endif
		for (int i = 0; i < 16; i++) {
			int t = blk * 16 + i;
			u32 v;
			if (t < 16) {
				u32 p = lr[t];
				v = (prev << 24) | (p >> 8);
				prev = p & 0xffu;
			} else if (t == 16) {
				v = (prev << 24) | 0x00800000u;
			} else if (t == 31) {
				v = 65u * 8u;
			} else {
				v = 0;
			}
			w[i] = v;
		}
		sha256_block(h, w);
	}
#ifdef __CUDA__
#pragma unroll
#endif
	for (int i = 0; i < 8; i++) out[i] = h[i];
}

// ---- AES-256 (FIPS 197), encryption with one 1 KiB table ----
//
// te0 is the usual T-table: te0[x] = (2·S[x], S[x], S[x], 3·S[x]) as a
// big-endian word; the other three tables are its byte rotations. The
// round keys (60 big-endian words) come from the host (aeskey.go).

FN u32 aes_round_word(const u32 *te0, u32 a, u32 b, u32 c, u32 d, u32 rk) {
	return te0[a >> 24] ^ rotr32(te0[(b >> 16) & 0xff], 8) ^ rotr32(te0[(c >> 8) & 0xff], 16) ^
	       rotr32(te0[d & 0xff], 24) ^ rk;
}

FN u32 aes_last_word(const u32 *sbox, u32 a, u32 b, u32 c, u32 d, u32 rk) {
	return (sbox[a >> 24] << 24 | sbox[(b >> 16) & 0xff] << 16 | sbox[(c >> 8) & 0xff] << 8 | sbox[d & 0xff]) ^ rk;
}

// aes256_encrypt encrypts the block (s0, s1, s2, s3) (big-endian words)
// in place. sbox holds S[x] as words.
FN void aes256_encrypt(const u32 *te0, const u32 *sbox, const u32 *rk, u32 s[4]) {
	u32 s0 = s[0] ^ rk[0], s1 = s[1] ^ rk[1], s2 = s[2] ^ rk[2], s3 = s[3] ^ rk[3];
#ifdef __CUDA__
#pragma unroll
#endif
	for (int r = 1; r < 14; r++) {
		const u32 *k = rk + 4 * r;
		u32 t0 = aes_round_word(te0, s0, s1, s2, s3, k[0]);
		u32 t1 = aes_round_word(te0, s1, s2, s3, s0, k[1]);
		u32 t2 = aes_round_word(te0, s2, s3, s0, s1, k[2]);
		u32 t3 = aes_round_word(te0, s3, s0, s1, s2, k[3]);
		s0 = t0; s1 = t1; s2 = t2; s3 = t3;
	}
	const u32 *k = rk + 56;
	s[0] = aes_last_word(sbox, s0, s1, s2, s3, k[0]);
	s[1] = aes_last_word(sbox, s1, s2, s3, s0, k[1]);
	s[2] = aes_last_word(sbox, s2, s3, s0, s1, k[2]);
	s[3] = aes_last_word(sbox, s3, s0, s1, s2, k[3]);
}

FN u32 aes_xtime(u32 x) { return ((x << 1) ^ ((x & 0x80u) ? 0x1bu : 0u)) & 0xffu; }

// aes_te0 returns te0[x] from S[x].
FN u32 aes_te0(u32 s) {
	u32 s2 = aes_xtime(s), s3 = s2 ^ s;
	return s2 << 24 | s << 16 | s << 8 | s3;
}

#define AES_SBOX_INIT { \
	0x63, 0x7c, 0x77, 0x7b, 0xf2, 0x6b, 0x6f, 0xc5, 0x30, 0x01, 0x67, 0x2b, 0xfe, 0xd7, 0xab, 0x76, \
	0xca, 0x82, 0xc9, 0x7d, 0xfa, 0x59, 0x47, 0xf0, 0xad, 0xd4, 0xa2, 0xaf, 0x9c, 0xa4, 0x72, 0xc0, \
	0xb7, 0xfd, 0x93, 0x26, 0x36, 0x3f, 0xf7, 0xcc, 0x34, 0xa5, 0xe5, 0xf1, 0x71, 0xd8, 0x31, 0x15, \
	0x04, 0xc7, 0x23, 0xc3, 0x18, 0x96, 0x05, 0x9a, 0x07, 0x12, 0x80, 0xe2, 0xeb, 0x27, 0xb2, 0x75, \
	0x09, 0x83, 0x2c, 0x1a, 0x1b, 0x6e, 0x5a, 0xa0, 0x52, 0x3b, 0xd6, 0xb3, 0x29, 0xe3, 0x2f, 0x84, \
	0x53, 0xd1, 0x00, 0xed, 0x20, 0xfc, 0xb1, 0x5b, 0x6a, 0xcb, 0xbe, 0x39, 0x4a, 0x4c, 0x58, 0xcf, \
	0xd0, 0xef, 0xaa, 0xfb, 0x43, 0x4d, 0x33, 0x85, 0x45, 0xf9, 0x02, 0x7f, 0x50, 0x3c, 0x9f, 0xa8, \
	0x51, 0xa3, 0x40, 0x8f, 0x92, 0x9d, 0x38, 0xf5, 0xbc, 0xb6, 0xda, 0x21, 0x10, 0xff, 0xf3, 0xd2, \
	0xcd, 0x0c, 0x13, 0xec, 0x5f, 0x97, 0x44, 0x17, 0xc4, 0xa7, 0x7e, 0x3d, 0x64, 0x5d, 0x19, 0x73, \
	0x60, 0x81, 0x4f, 0xdc, 0x22, 0x2a, 0x90, 0x88, 0x46, 0xee, 0xb8, 0x14, 0xde, 0x5e, 0x0b, 0xdb, \
	0xe0, 0x32, 0x3a, 0x0a, 0x49, 0x06, 0x24, 0x5c, 0xc2, 0xd3, 0xac, 0x62, 0x91, 0x95, 0xe4, 0x79, \
	0xe7, 0xc8, 0x37, 0x6d, 0x8d, 0xd5, 0x4e, 0xa9, 0x6c, 0x56, 0xf4, 0xea, 0x65, 0x7a, 0xae, 0x08, \
	0xba, 0x78, 0x25, 0x2e, 0x1c, 0xa6, 0xb4, 0xc6, 0xe8, 0xdd, 0x74, 0x1f, 0x4b, 0xbd, 0x8b, 0x8a, \
	0x70, 0x3e, 0xb5, 0x66, 0x48, 0x03, 0xf6, 0x0e, 0x61, 0x35, 0x57, 0xb9, 0x86, 0xc1, 0x1d, 0x9e, \
	0xe1, 0xf8, 0x98, 0x11, 0x69, 0xd9, 0x8e, 0x94, 0x9b, 0x1e, 0x87, 0xe9, 0xce, 0x55, 0x28, 0xdf, \
	0x8c, 0xa1, 0x89, 0x0d, 0xbf, 0xe6, 0x42, 0x68, 0x41, 0x99, 0x2d, 0x0f, 0xb0, 0x54, 0xbb, 0x16, \
}

// aes_ctr_block returns keystream block number blk (the counter block is
// the 128-bit big-endian blk) as four little-endian words, ready to store:
// byte i of the keystream block is byte i of the result in memory.
FN void aes_ctr_block(const u32 *te0, const u32 *sbox, const u32 *rk, u64 blk, u32 out[4]) {
	u32 s[4] = {0, 0, (u32)(blk >> 32), (u32)blk};
	aes256_encrypt(te0, sbox, rk, s);
#ifdef __CUDA__
#pragma unroll
#endif
	for (int i = 0; i < 4; i++) out[i] = bswap32(s[i]);
}

#endif
