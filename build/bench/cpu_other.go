//go:build !linux

package main

import "errors"

var errLinuxOnly = errors.New("bench: needs Linux")

func pinSelf(cpus []int) error { return errLinuxOnly }

func raiseFileLimit() (uint64, error) { return 0, errLinuxOnly }
