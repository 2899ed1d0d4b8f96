package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
)

// profileEnv, when set to a loopback host:port, serves Go's profiles
// (/debug/pprof/) there: for measuring the hot path under load
// (build/bench), never exposed beyond the machine.
const profileEnv = "GANTRY_PPROF"

func serveProfiles() {
	addr := os.Getenv(profileEnv)
	if addr == "" {
		return
	}
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		fmt.Fprintf(os.Stderr, "gantry: %s=%q: want a loopback host:port; profiles not served\n", profileEnv, addr)
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go func() {
		if err := http.ListenAndServe(addr, mux); err != nil && !strings.Contains(err.Error(), "closed") {
			fmt.Fprintf(os.Stderr, "gantry: %s: %v\n", profileEnv, err)
		}
	}()
}
