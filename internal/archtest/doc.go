// Package archtest holds tests that enforce the repository's structure: the
// dependency direction and package documentation. It has no code of its own.
package archtest
