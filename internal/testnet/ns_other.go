//go:build !linux

package testnet

import (
	"errors"
	"os"
)

var errNotLinux = errors.New("testnet: network namespaces and TUN devices need Linux")

func inNamespace(ns string, fn func() error) error { return errNotLinux }

func openTUN(ns, ifname string) (*os.File, error) { return nil, errNotLinux }
