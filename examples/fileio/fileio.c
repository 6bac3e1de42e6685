/*
 * An I/O-heavy job: it reads every file in an input directory and writes
 * large output files, with little computing in between, so that the cost
 * of the file system calls is what a run measures (the wasm benchmark's
 * I/O workload, `gpunet bench wasm`). Args: [-in DIR] [-out DIR] FILES MIB
 * [RECORD]. It reads each regular file in DIR (default /in), in name order,
 * through stdio, folding its bytes into a 64-bit FNV-1a digest; then writes
 * MIB MiB in all, split evenly over FILES files out-000.bin, out-001.bin, …
 * in the output directory (default /out), with fwrite, RECORD bytes at a
 * time (default 4096; 1 to 1048576), and last digest.txt: the input
 * digest, the number of input files and bytes, and the number of bytes
 * written. Each output
 * record is a fixed pattern drawn from the input digest with the file's
 * and the record's number in its first 16 bytes, so every build writes the
 * same bytes. Build with c-build.sh: clang -O2 -ffp-contract=off, for
 * wasm32-wasi and natively.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static long arg(const char *s, long max, const char *name) {
	char *end;
	long v = strtol(s, &end, 10);
	if (*end != 0 || v < 1 || v > max) {
		fprintf(stderr, "fileio: %s %s: want a whole number from 1 to %ld\n", name, s, max);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv) {
	const char *in = "/in", *out = "/out";
	int a = 1;
	while (a + 1 < argc && (strcmp(argv[a], "-in") == 0 || strcmp(argv[a], "-out") == 0)) {
		if (strcmp(argv[a], "-in") == 0)
			in = argv[a + 1];
		else
			out = argv[a + 1];
		a += 2;
	}
	if (argc - a < 2 || argc - a > 3) {
		fprintf(stderr, "usage: fileio [-in DIR] [-out DIR] FILES MIB [RECORD]\n");
		return 2;
	}
	long files = arg(argv[a], 100000, "FILES"), mib = arg(argv[a + 1], 1 << 20, "MIB");
	long record = argc - a > 2 ? arg(argv[a + 2], 1 << 20, "RECORD") : 4096;

	/* Read: every regular file in the input directory, in name order. */
	DIR *d = opendir(in);
	if (!d) {
		fprintf(stderr, "fileio: open %s: %s\n", in, strerror(errno));
		return 1;
	}
	size_t n = 0, cap = 0;
	char **names = NULL;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 256;
			names = realloc(names, cap * sizeof *names);
		}
		names[n++] = strdup(de->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof *names, cmp);
	uint64_t h = 0xcbf29ce484222325ull, inBytes = 0;
	size_t inFiles = 0;
	static unsigned char buf[1 << 16];
	char path[4096];
	for (size_t i = 0; i < n; i++) {
		snprintf(path, sizeof path, "%s/%s", in, names[i]);
		struct stat st;
		if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
			continue;
		FILE *f = fopen(path, "rb");
		if (!f) {
			fprintf(stderr, "fileio: open %s: %s\n", path, strerror(errno));
			return 1;
		}
		size_t k;
		while ((k = fread(buf, 1, sizeof buf, f)) > 0) {
			for (size_t j = 0; j < k; j++)
				h = (h ^ buf[j]) * 0x100000001b3ull;
			inBytes += k;
		}
		fclose(f);
		inFiles++;
	}

	/* Write: FILES files of MIB MiB, RECORD bytes a call. */
	unsigned char *rec = malloc((size_t)record);
	uint64_t x = h | 1;
	for (long i = 0; i < record; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		rec[i] = (unsigned char)x;
	}
	mkdir(out, 0755);
	uint64_t outBytes = 0, all = (uint64_t)mib << 20;
	for (long fi = 0; fi < files; fi++) {
		uint64_t total = all / (uint64_t)files + ((uint64_t)fi < all % (uint64_t)files);
		snprintf(path, sizeof path, "%s/out-%03ld.bin", out, fi);
		FILE *f = fopen(path, "wb");
		if (!f) {
			fprintf(stderr, "fileio: create %s: %s\n", path, strerror(errno));
			return 1;
		}
		for (uint64_t w = 0, r = 0; w < total; r++) {
			size_t k = total - w < (uint64_t)record ? (size_t)(total - w) : (size_t)record;
			if (k >= 16) {
				uint64_t hdr[2] = {(uint64_t)fi, r}; /* little-endian on both targets */
				memcpy(rec, hdr, sizeof hdr);
			}
			if (fwrite(rec, 1, k, f) != k) {
				fprintf(stderr, "fileio: write %s: %s\n", path, strerror(errno));
				return 1;
			}
			w += k;
		}
		if (fclose(f) != 0) {
			fprintf(stderr, "fileio: close %s: %s\n", path, strerror(errno));
			return 1;
		}
		outBytes += total;
	}
	snprintf(path, sizeof path, "%s/digest.txt", out);
	FILE *f = fopen(path, "w");
	if (!f || fprintf(f, "%016" PRIx64 " %zu %" PRIu64 " %" PRIu64 "\n", h, inFiles, inBytes, outBytes) < 0 || fclose(f) != 0) {
		fprintf(stderr, "fileio: write %s\n", path);
		return 1;
	}
	return 0;
}
