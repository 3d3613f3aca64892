//go:build !darwin

package main

// systemOpener opens a file in the user's browser (freedesktop.org).
const systemOpener = "xdg-open"
