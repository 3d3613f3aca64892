//go:build !linux

package main

import (
	"errors"
	"time"
)

// The bench reads procfs; elsewhere it builds (so the module cross-compiles)
// and refuses to run. Compile-checked only: no non-Linux machine runs it.

var errNotLinux = errors.New("the bench needs Linux (procfs)")

type cpuUsage struct {
	Ticks time.Duration
	Sched time.Duration
}

func readCPU(int) (cpuUsage, error)           { return cpuUsage{}, errNotLinux }
func readRSS(int) (memOf, error)              { return memOf{}, errNotLinux }
func processGone(int) bool                    { return false }
func readCmdline(int) ([]string, error)       { return nil, errNotLinux }
func listeningPorts() (map[int]bool, error)   { return nil, errNotLinux }
func listeningOf([]int) (map[int]bool, error) { return nil, errNotLinux }
func platformCheck() error                    { return errNotLinux }

type pinnedSet struct{ pids []int }

func pinAll(pids []int) *pinnedSet       { return &pinnedSet{pids: pids} }
func (s *pinnedSet) alive() (int, error) { return len(s.pids), errNotLinux }
func (s *pinnedSet) close()              {}

func watchExit(int) (<-chan time.Time, func(), error) { return nil, nil, errNotLinux }
