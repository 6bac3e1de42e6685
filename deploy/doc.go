// Package deploy holds what an operator installs beside the gpunet binary,
// and the tests that keep it true: systemd units for a node and a provider
// agent (systemd/, checked by systemd-analyze), Prometheus alert rules
// (prometheus/, checked by promtool and against the metrics the code
// exports), and the command lines of docs/operators.md and
// docs/provider.md, checked against the CLI. It has no code of its own.
package deploy
