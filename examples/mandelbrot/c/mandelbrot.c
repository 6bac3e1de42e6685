/*
 * The mandelbrot example's kernel in C, for the wasm benchmark's
 * LLVM-compiled guest (DESIGN.md section 9: wasm at most 1.5x native "for
 * LLVM-compiled guests"). Same algorithm, arguments and output as the Go
 * program next door (../main.go, ../kernel): it renders the Mandelbrot set to
 * /out/mandelbrot.pgm, byte for byte the same image. Build with build.sh:
 * clang -O2 -ffp-contract=off, for wasm32-wasi and natively.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int isqrt(int n) {
	int r = 0;
	while ((r + 1) * (r + 1) <= n)
		r++;
	return r;
}

static unsigned char shade(int n, int max_iter) {
	if (n >= max_iter)
		return 0;
	return (unsigned char)(32 + 223 * isqrt(n * 1024 / max_iter) / 32);
}

static int escape(double cr, double ci, int max_iter) {
	double zr = 0, zi = 0;
	for (int n = 0; n < max_iter; n++) {
		double zr2 = zr * zr, zi2 = zi * zi;
		if (zr2 + zi2 > 4)
			return n;
		zi = (2 * zr) * zi + ci;
		zr = (zr2 - zi2) + cr;
	}
	return max_iter;
}

static int arg(int argc, char **argv, int i, int def, const char *name) {
	if (i >= argc)
		return def;
	char *end;
	long v = strtol(argv[i], &end, 10);
	if (*end != 0 || v < 1 || v > 100000) {
		fprintf(stderr, "mandelbrot: %s %s: want a whole number from 1 to 100000\n", name, argv[i]);
		exit(2);
	}
	return (int)v;
}

int main(int argc, char **argv) {
	const char *out = "/out/mandelbrot.pgm";
	int a = 1;
	if (argc > 2 && strcmp(argv[1], "-out") == 0) {
		out = argv[2];
		a = 3;
	}
	if (argc - a > 3) {
		fprintf(stderr, "usage: mandelbrot [-out FILE] [WIDTH [HEIGHT [MAXITER]]]\n");
		return 2;
	}
	int w = arg(argc, argv, a, 640, "width"), h = arg(argc, argv, a + 1, 480, "height"),
	    iter = arg(argc, argv, a + 2, 1000, "maxiter");
	unsigned char *pix = malloc((size_t)w * h);
	if (!pix) {
		fprintf(stderr, "mandelbrot: out of memory\n");
		return 1;
	}
	const double cx = -0.75, cy = 0, width = 3.5;
	double scale = width / w;
	double x0 = cx - ((double)w * scale) / 2;
	double y0 = cy + ((double)h * scale) / 2;
	for (int py = 0; py < h; py++) {
		double ci = y0 - (double)py * scale;
		for (int px = 0; px < w; px++) {
			double cr = x0 + (double)px * scale;
			pix[py * w + px] = shade(escape(cr, ci, iter), iter);
		}
	}
	if (strcmp(out, "/out/mandelbrot.pgm") == 0)
		mkdir("/out", 0755);
	FILE *f = fopen(out, "wb");
	if (!f) {
		perror("mandelbrot: open output");
		return 1;
	}
	fprintf(f, "P5\n%d %d\n255\n", w, h);
	if (fwrite(pix, 1, (size_t)w * h, f) != (size_t)w * h || fclose(f) != 0) {
		perror("mandelbrot: write output");
		return 1;
	}
	printf("mandelbrot (C): %dx%d, %d iterations\n", w, h, iter);
	return 0;
}
