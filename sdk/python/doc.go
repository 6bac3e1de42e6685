// Package pythonsdk holds the tests of the Python client library in this
// directory (the gpunet package, sdk/python/gpunet): they run python3 on
// its unittest scripts against vectors made by the Go code (txs signed from
// the same key, sealed blobs both ways, key files, spec errors) and against
// a real devnet. The package has no Go code of its own.
package pythonsdk
