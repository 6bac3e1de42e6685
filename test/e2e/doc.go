// Package e2e tests the real gpunet binary end to end: validators killed
// with SIGKILL and restarted, a four-validator network losing and regaining
// members, and the command line's JSON contract. It has no code of its own.
package e2e
