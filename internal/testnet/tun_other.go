//go:build !linux

package testnet

import (
	"errors"
	"os"
)

func openTUN(ns, ifname string) (*os.File, error) {
	return nil, errors.New("testnet: TUN devices and network namespaces need Linux")
}
