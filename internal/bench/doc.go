// Package bench is the wasm benchmark (`gpunet bench wasm`, wasm.go). The
// other benchmarks of `gpunet bench` have a package each beside it:
// ledgerbench, schedbench, jobbench, apibench, containerbench, verifybench
// and gpubench, sharing measure (statistics, units, text), market (keys,
// signing, a seeded market) and statestore (states to apply blocks to).
package bench
