//go:build darwin

package observe

const exitPollBatchForTest = 64
