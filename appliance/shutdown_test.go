package appliance_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"
)

// TestShutdownTwice calls Shutdown again after it returned and from two
// goroutines at once (a signal handler racing a deferred call): no panic,
// every call returns the first one's result, and the listeners are closed.
func TestShutdownTwice(t *testing.T) {
	n, ip := startNode(t, nil) // its cleanup calls Shutdown a further time
	addr := n.Addr("mqtt").String()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = n.Shutdown(ctx) }()
	}
	wg.Wait()
	errs[2] = n.Shutdown(ctx)
	for i, err := range errs {
		if err != errs[0] {
			t.Fatalf("Shutdown call %d returned %v, the first returned %v", i, err, errs[0])
		}
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("MQTT listener on %s (node %s) still accepts after Shutdown", addr, ip)
	}
}
