//go:build !linux && !darwin && !freebsd

package hwinfo

import (
	"errors"
	"runtime"
)

var errUnsupportedOS = errors.New("not implemented on " + runtime.GOOS)

func sysinfoRAM() (uint64, error) { return 0, errUnsupportedOS }

func diskFree(string) (uint64, error) { return 0, errUnsupportedOS }
