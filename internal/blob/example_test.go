package blob_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/gpunet/gpunet/internal/blob"
)

func Example() {
	dir, _ := os.MkdirTemp("", "blobs")
	defer os.RemoveAll(dir)
	store, err := blob.OpenStore(dir, 1<<30)
	if err != nil {
		panic(err)
	}

	// A node mounts the gateway beside its other API routes.
	h := blob.NewHandler(store, nil)
	mux := http.NewServeMux()
	mux.Handle("/v1/blobs", h)
	mux.Handle("/v1/blobs/", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	ctx := context.Background()
	c := blob.NewClient(srv.URL)
	sum, n, err := c.Put(ctx, strings.NewReader("hello, gpunet"))
	if err != nil {
		panic(err)
	}
	fmt.Println(sum, n)

	var buf bytes.Buffer
	if _, err := c.Get(ctx, sum, &buf); err != nil {
		panic(err)
	}
	fmt.Println(buf.String())
	// Output:
	// sha256:185858b4afb032d66e7b4af0ff84f393473053dd9f5316f790e6d67dde3c063e 13
	// hello, gpunet
}
