package main

import (
	"math"
	"slices"
	"time"
)

// Summary describes a set of latency samples.
type Summary struct {
	N      int     `json:"n"`
	Min    float64 `json:"minMs"`
	Median float64 `json:"medianMs"`
	P90    float64 `json:"p90Ms"`
	Max    float64 `json:"maxMs"`
}

// Percentile returns the p-th percentile (0..100) of samples by linear
// interpolation between closest ranks (numpy's default). It returns NaN for
// no samples and does not modify samples.
func Percentile(samples []float64, p float64) float64 {
	if len(samples) == 0 {
		return math.NaN()
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	return percentileSorted(s, p)
}

func percentileSorted(s []float64, p float64) float64 {
	if p <= 0 {
		return s[0]
	}
	if p >= 100 {
		return s[len(s)-1]
	}
	rank := p / 100 * float64(len(s)-1)
	lo := int(math.Floor(rank))
	hi := int(math.Ceil(rank))
	frac := rank - float64(lo)
	return s[lo] + (s[hi]-s[lo])*frac
}

// Summarize returns min, median, p90 and max of samples.
func Summarize(samples []float64) Summary {
	if len(samples) == 0 {
		nan := math.NaN()
		return Summary{Min: nan, Median: nan, P90: nan, Max: nan}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	return Summary{
		N:      len(s),
		Min:    s[0],
		Median: percentileSorted(s, 50),
		P90:    percentileSorted(s, 90),
		Max:    s[len(s)-1],
	}
}

// ms converts a duration to float milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
