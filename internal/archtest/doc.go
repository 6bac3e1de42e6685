// Package archtest holds tests that enforce the repository's structure: the
// dependency direction, binaries that link no test code, and package
// documentation; and CheckPure, which the deterministic packages' own tests
// call.
package archtest
