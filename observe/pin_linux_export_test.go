//go:build linux

package observe

const exitPollBatchForTest = exitPollBatch
