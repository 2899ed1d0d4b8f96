package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() { os.Exit(chaosMain()) }

func chaosMain() int {
	bin := flag.String("gantry", "bin/gantry", "the gantry binary (make build)")
	duration := flag.Duration("duration", envDuration("CHAOS_DURATION", 10*time.Minute),
		"how long to run the matrix (CHAOS_DURATION); every cluster size runs it at least once")
	hold := flag.Duration("hold", 8*time.Second, "how long each fault lasts (longer than the 6 s after which the leader moves a silent node's partitions)")
	sizes := flag.String("nodes", "3,5", "cluster sizes, in turn")
	pubs := flag.Int("publishers", 6, "publishers (half at QoS 1, half at QoS 2)")
	pace := flag.Duration("pace", 10*time.Millisecond, "pause between two messages of one publisher")
	only := flag.String("faults", "", "comma-separated fault names to run (default: all)")
	verbose := flag.Bool("v", false, "log every fault as it is injected")
	logs := flag.String("logs", "", "a directory to keep every node's log in")
	flag.Parse()

	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	matrix := faults
	if *only != "" {
		matrix = nil
		for _, name := range strings.Split(*only, ",") {
			f, err := faultNamed(strings.TrimSpace(name))
			if err != nil {
				fmt.Fprintln(os.Stderr, "chaos:", err)
				return 2
			}
			matrix = append(matrix, f)
		}
	}
	root := os.Geteuid() == 0
	if !root {
		fmt.Fprintln(os.Stderr, "chaos: not root: partitions and the full disk are skipped (they need network namespaces and a tmpfs)")
	}
	dir, err := os.MkdirTemp("", "gantry-chaos")
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	defer os.RemoveAll(dir)

	var current *run
	interrupted := make(chan os.Signal, 1)
	signal.Notify(interrupted, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-interrupted
		fmt.Fprintln(os.Stderr, "chaos: interrupted: cleaning up")
		if current != nil {
			current.close()
		}
		os.RemoveAll(dir)
		os.Exit(130)
	}()

	start := time.Now()
	var rows []row
	var notes []string
	epochBad := 0
	for pass := 1; ; pass++ {
		for _, s := range strings.Split(*sizes, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 3 {
				fmt.Fprintf(os.Stderr, "chaos: -nodes %q: want sizes of at least 3\n", s)
				return 2
			}
			if pass > 1 && time.Since(start) > *duration {
				break
			}
			fmt.Fprintf(os.Stderr, "chaos: pass %d, %d nodes (%v elapsed)\n", pass, n, time.Since(start).Round(time.Second))
			opts := runOptions{Nodes: n, Publishers: *pubs, Pace: *pace, Hold: *hold, Bin: *bin, Dir: dir, Log: log, Netns: root, Logs: *logs}
			end := func(r *run) {
				rr, nn := r.finish(60 * time.Second)
				epochBad += len(r.owners.violations())
				rows = append(rows, rr...)
				notes = append(notes, nn...)
				notes = append(notes, fmt.Sprintf("%d nodes, pass %d: epochs: %s", n, pass, r.owners.summary()))
				r.close()
				current = nil
			}
			var r *run
			for _, f := range matrix {
				if pass > 1 && time.Since(start) > *duration {
					break
				}
				if r == nil {
					if r, err = startRun(opts); err != nil {
						fmt.Fprintf(os.Stderr, "chaos: %d nodes: %v\n", n, err)
						return 1
					}
					current = r
				}
				r.apply(f)
				last := r.phases[len(r.phases)-1]
				fmt.Fprintf(os.Stderr, "chaos: %d nodes, %s on %s: %s\n", n, f.name, last.target, orOK(last.err, last.skipped))
				if last.err != "" {
					// What follows would only inherit the damage: check this
					// cluster and go on with a fresh one.
					end(r)
					r = nil
					notes = append(notes, fmt.Sprintf("%d nodes, pass %d: a fresh cluster after %q, which did not recover", n, pass, f.name))
				}
			}
			if r != nil {
				end(r)
			}
		}
		if time.Since(start) > *duration {
			break
		}
	}
	fmt.Printf("make chaos: %v, nodes %s, %d publishers every %v, faults held %v\n\n", time.Since(start).Round(time.Second), *sizes, *pubs, *pace, *hold)
	fmt.Print(summary(rows))
	fmt.Println()
	fmt.Println("Every run:")
	fmt.Println()
	fmt.Print(table(rows))
	fmt.Println()
	bad, known := epochBad, 0
	for _, r := range rows {
		b, k := r.split()
		bad += b
		known += k
		if r.err != "" {
			bad++
			fmt.Printf("did not recover: %d nodes, %s: %s\n", r.nodes, r.fault, r.err)
		}
	}
	for _, e := range examples(rows) {
		fmt.Println("violation:", e)
	}
	if known > 0 {
		seen := map[string]bool{}
		for _, r := range rows {
			if _, k := r.split(); k > 0 && !seen[r.fault] {
				seen[r.fault] = true
				fmt.Printf("known (expected to fail on today's main): %s: %s\n", r.fault, r.known)
			}
		}
	}
	for _, n := range notes {
		fmt.Println("note:", n)
	}
	if bad > 0 {
		fmt.Printf("FAIL: %d violations (and %d known)\n", bad, known)
		return 1
	}
	if known > 0 {
		fmt.Printf("ok but for %d known violations (expected to fail)\n", known)
		return 0
	}
	fmt.Println("ok: nothing acknowledged was lost, no violation")
	return 0
}

func orOK(err, skipped string) string {
	switch {
	case skipped != "":
		return "skipped: " + skipped
	case err != "":
		return err
	}
	return "recovered"
}

func envDuration(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
		fmt.Fprintf(os.Stderr, "chaos: %s=%q is not a duration (like 10m); using %v\n", name, v, def)
	}
	return def
}
