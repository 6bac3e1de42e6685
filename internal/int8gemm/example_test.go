package int8gemm_test

import (
	"fmt"

	"github.com/gpunet/gpunet/internal/int8gemm"
)

// A 2×3 A times a 3×2 B, whose columns are given one after another.
func ExamplePackedB_MulRows() {
	b := int8gemm.NewPackedB(3, 2)
	b.SetPanel(0, []int8{
		1, 0, -1, // column 0
		-128, -128, -128, // column 1
	})
	a := []int8{
		1, 2, 3,
		-128, 0, 127,
	}
	c := make([]int32, 2*2)
	b.MulRows(c, a)
	fmt.Println(c[:2])
	fmt.Println(c[2:])
	// Output:
	// [-2 -768]
	// [-255 128]
}
