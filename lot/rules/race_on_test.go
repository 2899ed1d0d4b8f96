//go:build race

package rules

// raceEnabled: the race detector makes sync.Pool (which package regexp
// uses) drop items at random, so allocation counts are not meaningful.
const raceEnabled = true
