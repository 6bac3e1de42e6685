// Package kernel is the compute kernel of the mandelbrot example: it renders
// the Mandelbrot set as an 8-bit grey image. It is a package of its own so
// that the same code runs natively and as the example's WebAssembly module,
// which is how benchmarks compare the two.
//
// The result is exactly reproducible on every platform: the arithmetic is
// IEEE-754 float64 with explicit conversions that forbid the compiler to
// fuse a multiply and an add (which Go allows on arm64, ppc64 and s390x and
// which would change the low bits), and pixel values are integers.
package kernel

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
)

// View is the part of the complex plane that is rendered: CenterX+iCenterY
// at the image's centre, Width units across.
type View struct {
	CenterX, CenterY, Width float64
}

// Whole is the view of the whole set.
var Whole = View{CenterX: -0.75, CenterY: 0, Width: 3.5}

// Render returns width×height grey pixels, row by row from the top: 0 for
// points in the set (still bounded after maxIter iterations), brighter the
// sooner a point escapes.
func Render(v View, width, height, maxIter int) []byte {
	pix := make([]byte, width*height)
	if width <= 0 || height <= 0 {
		return pix
	}
	scale := v.Width / float64(width)
	x0 := v.CenterX - float64(float64(width)*scale)/2
	y0 := v.CenterY + float64(float64(height)*scale)/2
	for py := 0; py < height; py++ {
		ci := y0 - float64(float64(py)*scale)
		row := pix[py*width : (py+1)*width]
		for px := range row {
			cr := x0 + float64(float64(px)*scale)
			row[px] = shade(escape(cr, ci, maxIter), maxIter)
		}
	}
	return pix
}

// escape returns the number of iterations z → z²+c takes to leave the
// circle of radius 2, or maxIter if it does not.
func escape(cr, ci float64, maxIter int) int {
	var zr, zi float64
	for n := 0; n < maxIter; n++ {
		zr2 := float64(zr * zr)
		zi2 := float64(zi * zi)
		if zr2+zi2 > 4 {
			return n
		}
		zi = float64(float64(2*zr)*zi) + ci
		zr = (zr2 - zi2) + cr
	}
	return maxIter
}

func shade(n, maxIter int) byte {
	if n >= maxIter {
		return 0
	}
	// A square-root-like ramp so that the slow-escaping border is visible.
	return byte(32 + 223*isqrt(n*1024/maxIter)/32)
}

func isqrt(n int) int {
	r := 0
	for (r+1)*(r+1) <= n {
		r++
	}
	return r
}

// PGM encodes grey pixels as a binary PGM (P5) image.
func PGM(width, height int, pix []byte) []byte {
	b := fmt.Appendf(nil, "P5\n%d %d\n255\n", width, height)
	return append(b, pix...)
}

// Checksum is the hex SHA-256 of data.
func Checksum(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// ParseArgs reads the example's arguments [WIDTH [HEIGHT [MAXITER]]],
// defaulting to 640, 480 and 1000.
func ParseArgs(args []string) (width, height, maxIter int, err error) {
	vals := []int{640, 480, 1000}
	if len(args) > len(vals) {
		return 0, 0, 0, fmt.Errorf("want at most %d arguments (width height maxiter), got %d", len(vals), len(args))
	}
	names := []string{"width", "height", "maxiter"}
	for i, a := range args {
		v, err := strconv.Atoi(a)
		if err != nil || v <= 0 || v > 1<<15 {
			return 0, 0, 0, fmt.Errorf("%s %q: want an integer from 1 to %d", names[i], a, 1<<15)
		}
		vals[i] = v
	}
	if vals[0]*vals[1] > 1<<26 {
		return 0, 0, 0, fmt.Errorf("image %dx%d is larger than 64 Mpixel", vals[0], vals[1])
	}
	return vals[0], vals[1], vals[2], nil
}
