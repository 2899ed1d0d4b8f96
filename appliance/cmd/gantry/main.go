// Command gantry runs one Gantry node.
//
//	gantry -config FILE     run from a JSON configuration file
//	gantry -dev             run on the embedded development defaults
//	gantry -checkConfig FILE validate a configuration file and exit
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"gantry/appliance"
	"gantry/appliance/config"
)

func main() {
	os.Exit(run())
}

func run() int {
	configPath := flag.String("config", "", "JSON configuration `file` (environment variables win over it)")
	dev := flag.Bool("dev", false, "run on the embedded development defaults (anonymous clients from loopback only)")
	check := flag.String("checkConfig", "", "validate the configuration `file` and exit")
	version := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *version {
		fmt.Println("gantry", appliance.Version)
		return 0
	}
	if *check != "" {
		if _, err := config.Load(*check, os.LookupEnv); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Println("configuration OK:", *check)
		return 0
	}
	var cfg config.Config
	var err error
	if *dev && *configPath == "" {
		cfg, err = config.LoadDev(os.LookupEnv)
	} else {
		cfg, err = config.Load(*configPath, os.LookupEnv)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return serve(cfg)
}

func serve(cfg config.Config) int {
	log := appliance.NewLogger(os.Stderr, cfg.Logging)
	node, err := appliance.New(cfg, log)
	if err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	if err := node.Start(); err != nil {
		log.Error("cannot start", "err", err)
		node.Shutdown(context.Background())
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	s := <-sig
	log.Info("shutting down", "component", "appliance", "signal", s.String())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := node.Shutdown(ctx); err != nil {
		log.Warn("shutdown did not finish in time", "component", "appliance", "err", err)
	}
	return 0
}
