package sandbox_test

import (
	"fmt"

	"github.com/gpunet/gpunet/internal/sandbox"
)

func ExampleCleanGuestPath() {
	for _, p := range []string{"/out", "//out/./logs/", "out", "/out/../../etc"} {
		clean, err := sandbox.CleanGuestPath(p)
		fmt.Printf("%q: %q %v\n", p, clean, err)
	}
	// Output:
	// "/out": "/out" <nil>
	// "//out/./logs/": "/out/logs" <nil>
	// "out": "" invalid output path: "out" is not absolute
	// "/out/../../etc": "" invalid output path: "/out/../../etc" contains ".."
}
