package fake_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/fake"
)

func Example() {
	work, _ := os.MkdirTemp("", "job")
	defer os.RemoveAll(work)
	os.MkdirAll(filepath.Join(work, "in"), 0o755)
	os.WriteFile(filepath.Join(work, "in", "input.txt"), []byte("hi"), 0o644)

	e := fake.New(fake.Echo())
	res, err := e.Run(context.Background(), &sandbox.Job{
		ID:      "j1",
		WorkDir: work,
		Outputs: []string{"/out"},
		Limits:  sandbox.Limits{Timeout: time.Minute},
	}, os.Stdout)
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(res.OutputDir)
	out, _ := os.ReadFile(filepath.Join(res.OutputDir, "out", "in", "input.txt"))
	fmt.Println(res.Reason, string(out), len(e.Jobs()))
	// Output:
	// echo: args []
	// echo: /in/input.txt (2 bytes)
	// exited 0 hi 1
}
