//go:build !linux

package reconciler

// watcherModes: the only watch here, fsnotify.
var watcherModes = []watcherMode{{name: "fsnotify", portable: true}}
