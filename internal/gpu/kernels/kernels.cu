// gpunet's CUDA kernels: the int8 GEMM of hardware challenges and of the
// GPU benchmark (dp4a for every GPU from compute capability 6.1, int8
// tensor cores through mma.sync from 8.0), the AES-256-CTR expansion of a
// challenge's matrices, and the SHA-256 Merkle hashing of the product.
//
// This file is the source of the committed PTX (kernels_sm_61.ptx,
// kernels_sm_80.ptx), which the CUDA driver compiles for the GPU at hand
// when gpunet loads it: gpunet needs only the driver, no CUDA toolkit.
// gen.sh regenerates the PTX with clang (Debian's clang-14); it uses no
// CUDA header, so the few CUDA builtins it needs are spelt out below.
//
// Layouts (package challenge): A is row-major N×K int8; B is given as its
// transpose, row-major M×K int8 (a column of B is K contiguous bytes); C
// is row-major N×M int32 with a row stride of ldc entries. K is a multiple
// of 64. The GEMM kernels read whole tiles: A must hold a multiple of 256
// rows and Bᵀ a multiple of 256 rows (the callers pad), and they write
// only rows < n and columns < m of C.

#include "common.h"

#define KERNEL extern "C" __attribute__((global))
#define SHARED __attribute__((shared))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#define DEVICE __attribute__((device)) static inline __attribute__((always_inline))

DEVICE u32 tid_x() { return __nvvm_read_ptx_sreg_tid_x(); }
DEVICE u32 ntid_x() { return __nvvm_read_ptx_sreg_ntid_x(); }
DEVICE u32 ctaid_x() { return __nvvm_read_ptx_sreg_ctaid_x(); }
DEVICE u32 ctaid_y() { return __nvvm_read_ptx_sreg_ctaid_y(); }
DEVICE u32 nctaid_x() { return __nvvm_read_ptx_sreg_nctaid_x(); }
DEVICE void sync_threads() { asm volatile("bar.sync 0;" ::: "memory"); }

// ---- AES-256-CTR ----

// aes256_ctr writes keystream blocks first .. first+nblocks-1 of the key
// whose round keys are rk (60 words) to out, 16 bytes each.
KERNEL void __launch_bounds__(256) aes256_ctr(u32 *out, const u32 *rk, u64 first, u64 nblocks) {
	SHARED u32 te0[256];
	SHARED u32 sbox[256];
	SHARED u32 keys[60];
	const u8 s[256] = AES_SBOX_INIT;
	for (u32 i = tid_x(); i < 256; i += ntid_x()) {
		sbox[i] = s[i];
		te0[i] = aes_te0(s[i]);
	}
	for (u32 i = tid_x(); i < 60; i += ntid_x()) keys[i] = rk[i];
	sync_threads();
	u64 stride = (u64)ntid_x() * nctaid_x();
	for (u64 b = (u64)ctaid_x() * ntid_x() + tid_x(); b < nblocks; b += stride) {
		u32 w[4];
		aes_ctr_block(te0, sbox, keys, first + b, w);
		u32 *o = out + 4 * b;
		asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(o), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3]) : "memory");
	}
}

// ---- Merkle hashing ----

// hash_leaves hashes leaves 0 .. nleaves-1 of c (64 entries each, stored
// contiguously) into out, 32 bytes per digest in the digest's byte order.
KERNEL void __launch_bounds__(256) hash_leaves(u32 *out, const u32 *c, u64 nleaves) {
	u64 stride = (u64)ntid_x() * nctaid_x();
	for (u64 x = (u64)ctaid_x() * ntid_x() + tid_x(); x < nleaves; x += stride) {
		u32 h[8];
		sha256_leaf(c + 64 * x, h);
#pragma unroll
		for (int i = 0; i < 8; i++) out[8 * x + i] = bswap32(h[i]);
	}
}

// hash_nodes hashes the level above width nodes (digests as in
// hash_leaves): node x of the result is H(0x01 ‖ in[2x] ‖ in[2x+1]), the
// right child all zero where 2x+1 = width.
KERNEL void __launch_bounds__(256) hash_nodes(u32 *out, const u32 *in, u64 width) {
	u64 half = (width + 1) / 2;
	u64 stride = (u64)ntid_x() * nctaid_x();
	for (u64 x = (u64)ctaid_x() * ntid_x() + tid_x(); x < half; x += stride) {
		u32 lr[16], h[8];
		bool right = 2 * x + 1 < width;
#pragma unroll
		for (int i = 0; i < 8; i++) {
			lr[i] = bswap32(in[16 * x + i]);
			lr[8 + i] = right ? bswap32(in[16 * x + 8 + i]) : 0;
		}
		sha256_node(lr, h);
#pragma unroll
		for (int i = 0; i < 8; i++) out[8 * x + i] = bswap32(h[i]);
	}
}

// ---- int8 GEMM with dp4a (compute capability ≥ 6.1) ----
//
// A block of 256 threads computes a 128×128 tile of C, each thread 8×8
// entries (rows ty + 16i, columns tx + 16j, so that neighbouring threads
// read neighbouring words of shared memory), over steps of 32 bytes of K.

#define D_BM 128
#define D_BN 128
#define D_BKW 8 // words of K per step
#define D_LD (D_BKW + 1)

DEVICE int dp4a(u32 a, u32 b, int c) {
	int d;
	asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
	return d;
}

KERNEL void __launch_bounds__(256) gemm_dp4a(int *c, const u32 *a, const u32 *bt, u32 n, u32 k, u32 m, u32 ldc) {
	SHARED u32 as[D_BM * D_LD];
	SHARED u32 bs[D_BN * D_LD];
	u32 t = tid_x(), tx = t & 15, ty = t >> 4;
	u32 row0 = ctaid_y() * D_BM, col0 = ctaid_x() * D_BN;
	u32 kw = k / 4; // words per row
	int acc[8][8];
	for (int i = 0; i < 8; i++)
		for (int j = 0; j < 8; j++) acc[i][j] = 0;
	// Each thread loads 16 bytes of A and of Bᵀ per step: row t/2, words
	// (t&1)*4 .. +3.
	u32 lr = t >> 1, lw = (t & 1) * 4;
	const u32 *ag = a + (u64)(row0 + lr) * kw + lw;
	const u32 *bg = bt + (u64)(col0 + lr) * kw + lw;
	for (u32 k0 = 0; k0 < kw; k0 += D_BKW) {
		u32 va0, va1, va2, va3, vb0, vb1, vb2, vb3;
		asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(va0), "=r"(va1), "=r"(va2), "=r"(va3) : "l"(ag + k0));
		asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(vb0), "=r"(vb1), "=r"(vb2), "=r"(vb3) : "l"(bg + k0));
		sync_threads();
		as[lr * D_LD + lw] = va0; as[lr * D_LD + lw + 1] = va1; as[lr * D_LD + lw + 2] = va2; as[lr * D_LD + lw + 3] = va3;
		bs[lr * D_LD + lw] = vb0; bs[lr * D_LD + lw + 1] = vb1; bs[lr * D_LD + lw + 2] = vb2; bs[lr * D_LD + lw + 3] = vb3;
		sync_threads();
#pragma unroll
		for (int kk = 0; kk < D_BKW; kk++) {
			u32 ra[8], rb[8];
#pragma unroll
			for (int i = 0; i < 8; i++) ra[i] = as[(ty + 16 * i) * D_LD + kk];
#pragma unroll
			for (int j = 0; j < 8; j++) rb[j] = bs[(tx + 16 * j) * D_LD + kk];
#pragma unroll
			for (int i = 0; i < 8; i++)
#pragma unroll
				for (int j = 0; j < 8; j++) acc[i][j] = dp4a(ra[i], rb[j], acc[i][j]);
		}
	}
#pragma unroll
	for (int i = 0; i < 8; i++) {
		u32 r = row0 + ty + 16 * i;
#pragma unroll
		for (int j = 0; j < 8; j++) {
			u32 col = col0 + tx + 16 * j;
			if (r < n && col < m) c[(u64)r * ldc + col] = acc[i][j];
		}
	}
}

// ---- int8 GEMM on tensor cores: mma.sync m16n8k32 (compute capability ≥ 8.0) ----
//
// A block of 8 warps computes a BM×BN tile of C, each warp a WM×WN part of
// it, over steps of 64 bytes of K. Tiles of A and Bᵀ reach shared memory
// through a STAGES-deep cp.async pipeline, rows padded to 80 bytes so that
// ldmatrix reads 8 rows without bank conflicts. Fragments follow the PTX
// ISA's layouts for mma.m16n8k32 with .s8 operands: ldmatrix.x4 of a 16×32
// tile of A gives a0..a3; of two 8-column tiles of Bᵀ, b0,b1 of each.

#if __CUDA_ARCH__ >= 800

#define BK 64
#define LDS 80 // bytes per row of a tile in shared memory

DEVICE u32 smem_addr(const void *p) {
	u32 r;
	asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
	return r;
}

DEVICE void cp_async16(u32 dst, const void *src) {
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> DEVICE void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

DEVICE void ldmatrix_x4(u32 addr, u32 &r0, u32 &r1, u32 &r2, u32 &r3) {
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
	             : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}

DEVICE void mma_s8(int *d, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
	asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
	             : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
	             : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

extern SHARED __attribute__((aligned(128))) u8 dyn_smem[];

template <int BM, int BN, int WM, int WN, int STAGES>
DEVICE void gemm_mma(int *c, const u8 *a, const u8 *bt, u32 n, u32 k, u32 m, u32 ldc) {
	const int THREADS = 256;
	const int MT = WM / 16, NT = WN / 8; // mma tiles per warp
	const int WARPS_N = BN / WN;
	u8 *sa = dyn_smem;                    // STAGES × BM × LDS
	u8 *sb = dyn_smem + STAGES * BM * LDS; // STAGES × BN × LDS
	u32 t = tid_x(), lane = t & 31, warp = t >> 5;
	u32 wm0 = (warp / WARPS_N) * WM, wn0 = (warp % WARPS_N) * WN;
	u32 row0 = ctaid_y() * BM, col0 = ctaid_x() * BN;
	const u8 *ag = a + (u64)row0 * k;
	const u8 *bg = bt + (u64)col0 * k;
	u32 sa0 = smem_addr(sa), sb0 = smem_addr(sb);
	u32 steps = k / BK;

	int acc[MT][NT][4];
#pragma unroll
	for (int i = 0; i < MT; i++)
#pragma unroll
		for (int j = 0; j < NT; j++)
#pragma unroll
			for (int q = 0; q < 4; q++) acc[i][j][q] = 0;

	// load copies step s's tiles into stage slot: 16-byte chunks, four per
	// row.
	auto load = [&](u32 s, u32 slot) {
#pragma unroll
		for (int x = 0; x < BM * 4 / THREADS; x++) {
			u32 ch = t + x * THREADS, r = ch >> 2, q = ch & 3;
			cp_async16(sa0 + (slot * BM + r) * LDS + q * 16, ag + (u64)r * k + s * BK + q * 16);
		}
#pragma unroll
		for (int x = 0; x < BN * 4 / THREADS; x++) {
			u32 ch = t + x * THREADS, r = ch >> 2, q = ch & 3;
			cp_async16(sb0 + (slot * BN + r) * LDS + q * 16, bg + (u64)r * k + s * BK + q * 16);
		}
	};

#pragma unroll
	for (int s = 0; s < STAGES - 1; s++) {
		if (s < (int)steps) load(s, s);
		cp_async_commit();
	}
	// ldmatrix: lane supplies the address of row (lane & 7) of matrix
	// lane >> 3.
	u32 lq = lane >> 3, lr = lane & 7;
	for (u32 s = 0; s < steps; s++) {
		cp_async_wait<STAGES - 2>();
		sync_threads();
		u32 next = s + STAGES - 1;
		if (next < steps) load(next, next % STAGES);
		cp_async_commit();
		u32 slot = s % STAGES;
		u32 abase = sa0 + (slot * BM + wm0) * LDS, bbase = sb0 + (slot * BN + wn0) * LDS;
#pragma unroll
		for (int kk = 0; kk < BK; kk += 32) {
			u32 af[MT][4], bf[NT][2];
#pragma unroll
			for (int i = 0; i < MT; i++)
				ldmatrix_x4(abase + (i * 16 + lr + (lq & 1) * 8) * LDS + kk + (lq >> 1) * 16,
				            af[i][0], af[i][1], af[i][2], af[i][3]);
#pragma unroll
			for (int j = 0; j < NT / 2; j++)
				ldmatrix_x4(bbase + (j * 16 + lr + (lq >> 1) * 8) * LDS + kk + (lq & 1) * 16,
				            bf[2 * j][0], bf[2 * j][1], bf[2 * j + 1][0], bf[2 * j + 1][1]);
#pragma unroll
			for (int i = 0; i < MT; i++)
#pragma unroll
				for (int j = 0; j < NT; j++)
					mma_s8(acc[i][j], af[i][0], af[i][1], af[i][2], af[i][3], bf[j][0], bf[j][1]);
		}
	}
	cp_async_wait<0>();

	// Fragment (i, j): rows g and g+8, columns 2·(lane&3) and +1.
	u32 g = lane >> 2, tc = (lane & 3) * 2;
#pragma unroll
	for (int i = 0; i < MT; i++) {
#pragma unroll
		for (int j = 0; j < NT; j++) {
			u32 col = col0 + wn0 + j * 8 + tc;
			u32 r = row0 + wm0 + i * 16 + g;
			if (col < m) {
				if (r < n) {
					int *p = c + (u64)r * ldc + col;
					p[0] = acc[i][j][0];
					p[1] = acc[i][j][1];
				}
				if (r + 8 < n) {
					int *p = c + (u64)(r + 8) * ldc + col;
					p[0] = acc[i][j][2];
					p[1] = acc[i][j][3];
				}
			}
		}
	}
}

// gemm_mma_128x128: warps 2×4, each 64×32; 3 stages (61,440 bytes of
// shared memory).
KERNEL void __launch_bounds__(256) gemm_mma_128x128(int *c, const u8 *a, const u8 *bt, u32 n, u32 k, u32 m, u32 ldc) {
	gemm_mma<128, 128, 64, 32, 3>(c, a, bt, n, k, m, ldc);
}

// gemm_mma_128x128_s4: the same with 4 stages (81,920 bytes).
KERNEL void __launch_bounds__(256) gemm_mma_128x128_s4(int *c, const u8 *a, const u8 *bt, u32 n, u32 k, u32 m, u32 ldc) {
	gemm_mma<128, 128, 64, 32, 4>(c, a, bt, n, k, m, ldc);
}

// gemm_mma_128x256: warps 2×4, each 64×64; 3 stages (92,160 bytes).
KERNEL void __launch_bounds__(256, 1) gemm_mma_128x256(int *c, const u8 *a, const u8 *bt, u32 n, u32 k, u32 m, u32 ldc) {
	gemm_mma<128, 256, 64, 64, 3>(c, a, bt, n, k, m, ldc);
}

// gemm_mma_256x128: warps 4×2, each 64×64; 3 stages (92,160 bytes).
KERNEL void __launch_bounds__(256, 1) gemm_mma_256x128(int *c, const u8 *a, const u8 *bt, u32 n, u32 k, u32 m, u32 ldc) {
	gemm_mma<256, 128, 64, 64, 3>(c, a, bt, n, k, m, ldc);
}

#endif
