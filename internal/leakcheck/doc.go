// Package leakcheck finds the goroutines a package's tests left running,
// for the check STYLE.md asks of every package with long-lived goroutines:
// shutdown leaves no goroutine behind. A package's TestMain calls Main,
// or a test calls Wait in its cleanup.
//
// It reads the stacks of all goroutines (runtime.Stack) and keeps those a
// match function picks; the goroutine that asks is never among them. It
// has no state and no goroutine of its own; its functions may be called
// from any goroutine.
package leakcheck
