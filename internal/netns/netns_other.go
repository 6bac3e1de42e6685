//go:build !linux

// Package netns runs code inside a Linux network namespace (Linux only).
package netns

import "errors"

// Do fails: network namespaces need Linux.
func Do(path string, fn func() error) error {
	return errors.New("network namespaces need Linux")
}
