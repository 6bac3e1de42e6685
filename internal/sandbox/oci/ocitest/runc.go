package ocitest

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Looking at containers from outside, as an operator would: what runc
// says of the containers under one state directory (an executor's
// Dir/runc), and what their cgroups counted.

// Container is one container runc lists.
type Container struct {
	ID     string `json:"id"`
	Status string `json:"status"` // "created", "running", "paused", "stopped"
}

func runcPath() string {
	if p, err := exec.LookPath("runc"); err == nil {
		return p
	}
	return "/usr/sbin/runc"
}

// ListContainers lists the containers of the runc state directory root.
func ListContainers(root string) ([]Container, error) {
	out, err := exec.Command(runcPath(), "--root", root, "list", "--format", "json").Output()
	if err != nil {
		return nil, fmt.Errorf("runc list: %w", err)
	}
	var l []Container
	if s := strings.TrimSpace(string(out)); s != "" && s != "null" {
		if err := json.Unmarshal(out, &l); err != nil {
			return nil, fmt.Errorf("runc list: %w", err)
		}
	}
	return l, nil
}

// ContainerCPU returns the CPU time the processes of container id have
// used, as its cgroup counts it (runc events --stats).
func ContainerCPU(root, id string) (time.Duration, error) {
	out, err := exec.Command(runcPath(), "--root", root, "events", "--stats", id).Output()
	if err != nil {
		return 0, fmt.Errorf("runc events --stats %s: %w", id, err)
	}
	var ev struct {
		Data struct {
			CPU struct {
				Usage struct {
					Total uint64 `json:"total"` // ns
				} `json:"usage"`
			} `json:"cpu"`
		} `json:"data"`
	}
	if err := json.Unmarshal(out, &ev); err != nil {
		return 0, fmt.Errorf("runc events --stats %s: %w", id, err)
	}
	return time.Duration(ev.Data.CPU.Usage.Total), nil
}

// Containers is ListContainers, failing t on an error.
func Containers(t testing.TB, root string) []Container {
	t.Helper()
	l, err := ListContainers(root)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// CPUUsage is ContainerCPU, failing t on an error, with the container's
// status.
func CPUUsage(t testing.TB, root, id string) (time.Duration, string) {
	t.Helper()
	d, err := ContainerCPU(root, id)
	if err != nil {
		t.Fatal(err)
	}
	status := ""
	for _, c := range Containers(t, root) {
		if c.ID == id {
			status = c.Status
		}
	}
	return d, status
}
