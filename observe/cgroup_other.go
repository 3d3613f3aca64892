//go:build !linux

package observe

import (
	"context"
	"fmt"
	"runtime"
)

var errNoCgroups = fmt.Errorf("cgroups on %s: %w", runtime.GOOS, ErrNotSupported)

// FindCgroup2: there are no cgroups on this system (ErrNotSupported).
func FindCgroup2() (Cgroup2, error) { return Cgroup2{}, errNoCgroups }

// ProcessCgroup: there are no cgroups on this system (ErrNotSupported).
func ProcessCgroup(int) (string, error) { return "", errNoCgroups }

// Cgroup: there are no cgroups on this system (ErrNotSupported).
func (h *Handle) Cgroup() (string, error) { return "", errNoCgroups }

// CgroupProcs: there are no cgroups on this system (ErrNotSupported).
func CgroupProcs(string) ([]int, error) { return nil, errNoCgroups }

// CgroupPopulated: there are no cgroups on this system (ErrNotSupported).
func CgroupPopulated(string) (bool, error) { return false, errNoCgroups }

// CgroupOOMKills: there are no cgroups on this system.
func CgroupOOMKills(string) (uint64, bool) { return 0, false }

// WaitCgroupEmpty: there are no cgroups on this system (ErrNotSupported).
func WaitCgroupEmpty(context.Context, string) error { return errNoCgroups }
