package main

import (
	"bytes"
	"os"
	"testing"
)

// TestGeneratedCodeIsCurrent: records_gen.go is what the generator writes
// for the record types as they are; run `go generate ./internal/ledger`
// after changing a record.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	want, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../records_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("internal/ledger/records_gen.go is stale: run go generate ./internal/ledger")
	}
}
