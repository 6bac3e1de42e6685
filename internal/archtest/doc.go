// Package archtest holds tests that enforce the repository's structure: the
// dependency direction and package documentation, and CheckPure, which the
// deterministic packages' own tests call.
package archtest
