package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"gantry/broker"
	"gantry/broker/topic"
	"gantry/lot/command"
	"gantry/lot/defs"
	"gantry/lot/interp"
	"gantry/lot/rules"
	"gantry/lot/schedule"
	"gantry/lot/syntax"
	"gantry/lot/topiccache"
)

// In-process client identifiers of the engine (reserved: a network client
// using one is refused).
const (
	triggerClientID = "$lot"
	commandClientID = "$lot-command"
)

// DefaultHopLimit bounds a chain of actions triggering each other.
const DefaultHopLimit = 8

// eventQueue bounds the client events waiting for the event goroutine.
const eventQueue = 4096

// Users tells the engine who a user is, for the access rules.
type Users interface {
	RuleUser(name string) (rules.User, bool)
}

// Options configure an Engine.
type Options struct {
	Broker *broker.Server
	Store  defs.Store
	Users  Users // nil: every user is an ordinary one without flags
	// EnvFile keeps the values of -setEnv and -setSecret; "" keeps them in
	// memory only.
	EnvFile string
	// KeptFile keeps the values of KEEP TOPIC across restarts (see
	// kept.go); "" keeps them in memory only.
	KeptFile string
	// ProjectsDir holds the projects of -loadProject NAME: NAME is a
	// folder below it (no absolute path, no "..", symbolic links are not
	// followed). "" makes -loadProject unavailable.
	ProjectsDir string
	// HopLimit bounds action chains (0: DefaultHopLimit).
	HopLimit int
	// Watch are topic filters whose messages the topic cache keeps
	// whatever is deployed (the engine otherwise watches only the topics
	// deployed LoT reads or reacts to; see watch.go).
	Watch []string
	// SeedRules puts the three seed rules (everyone may connect, publish
	// and subscribe) into an empty store at Start, as a new broker has.
	SeedRules bool
	Clock     schedule.Clock  // nil: the real clock
	Interp    *interp.Options // nil: interpreter defaults
	Cache     *topiccache.Options
	Logger    *slog.Logger
	// Connectors runs the deployed connectors (the drivers); nil: they
	// are only stored and published.
	Connectors Connectors
	// KeptOut, when set, is told every value a KEEP TOPIC kept on this
	// node (a cluster sends it to every node's cache: MergeKept there).
	KeptOut KeptReplicator
	// Placement, when set, says where timers and ON START actions run
	// (placement.go); nil runs them here.
	Placement Placement
	// Handlers completes the command interface with what the engine does
	// not own (users); the engine fills in Entities, Runner, Environment
	// and Projects.
	Handlers command.Handlers
}

// Connectors runs deployed connectors. Check is asked about each
// connector a change puts, before the change is stored: an error (with
// positions) refuses the deploy. Deploy is given every stored connector
// that builds, after each applied change and at Start, on the applying
// goroutine: it must return without waiting for devices.
type Connectors interface {
	Check(c *syntax.Connector, env interp.EnvReader) error
	Deploy(list []DeployedConnector, env interp.EnvReader)
}

// DeployedConnector is one stored connector that builds.
type DeployedConnector struct {
	Name   string
	Source string
	Def    *syntax.Connector
}

// Stats are the engine's counters.
type Stats struct {
	Runs          atomic.Uint64 // action runs started
	Errors        atomic.Uint64 // runs that ended with an error
	Loops         atomic.Uint64 // publishes refused at the hop limit
	Published     atomic.Uint64 // messages published by actions and models
	EventsDropped atomic.Uint64 // client events dropped on a full queue
}

// Engine runs the deployed LoT of one node.
type Engine struct {
	o     Options
	log   *slog.Logger
	cache *topiccache.Cache
	rules *rules.Engine
	sched *schedule.Scheduler
	env   *envStore
	disp  *command.Dispatcher
	stats Stats

	dep     atomic.Pointer[deployment]
	scratch sync.Pool // *runScratch of action runs
	trace   tracer    // -actionTrace (trace.go)

	trig   *broker.Client // subscribed to what LoT watches (watch.go); publishes as LoT
	cmd    *broker.Client // the command topic
	events chan broker.Event

	// lastPayload is ON CHANGE's memory: the last payload of each concrete
	// topic an ON CHANGE filter matched. Only the trigger goroutine uses it.
	lastPayload map[string]payloadSum
	// matched is the trigger goroutine's buffer of matching actions.
	matched []*topic.Entry[*action]

	applyMu   sync.Mutex              // serialises deploys: a change is checked and applied as one step
	mu        sync.Mutex              // guards timers, errored, described, broken, watching
	timers    map[string]string       // action with a timer → its schedule, as text
	errored   map[string]*errorRecord // actions and models (errorKey) that failed since they were deployed
	described map[string]bool         // actions with a retained DESCRIPTION
	broken    map[defKey]error        // stored definitions left out because they do not build, and why
	watching  map[string]bool         // the trigger client's subscriptions
	// errorsShown counts the errored records with published set, so that
	// a good run checks for an error topic to clear without taking mu.
	errorsShown atomic.Int32
	unwatch     func()
	ctx         context.Context
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	keptWake    chan struct{} // a KEEP TOPIC changed the kept values (kept.go)
	stopOnce    sync.Once
}

// maxHopLimit is the largest Options.HopLimit: Message.Hops is a byte.
const maxHopLimit = 254

// Validate reports the first option out of range.
func (o Options) Validate() error {
	switch {
	case o.Broker == nil || o.Store == nil:
		return errors.New("runtime: Options.Broker and Options.Store are required")
	case o.HopLimit < 0 || o.HopLimit > maxHopLimit:
		return fmt.Errorf("runtime: Options.HopLimit = %d, want 1..%d (0: %d)", o.HopLimit, maxHopLimit, DefaultHopLimit)
	}
	return nil
}

// New builds an engine; Start runs it.
func New(o Options) (*Engine, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.HopLimit == 0 {
		o.HopLimit = DefaultHopLimit
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	e := &Engine{o: o, log: log.With("component", "lot"), timers: map[string]string{}, errored: map[string]*errorRecord{}, described: map[string]bool{}, watching: map[string]bool{},
		events: make(chan broker.Event, eventQueue), lastPayload: map[string]payloadSum{}, keptWake: make(chan struct{}, 1)}
	var err error
	if e.cache, err = topiccache.New(o.Cache); err != nil {
		return nil, err
	}
	if e.sched, err = schedule.New(&schedule.Options{Clock: o.Clock, Logger: log, MinInterval: minTimerInterval}); err != nil {
		return nil, err
	}
	if e.env, err = openEnv(o.EnvFile); err != nil {
		return nil, err
	}
	set, err := rules.Compile(rules.Builtins(), nil)
	if err != nil {
		return nil, fmt.Errorf("runtime: built-in rules: %w", err)
	}
	e.rules = rules.NewEngine(set)
	e.scratch.New = e.newScratch
	e.dep.Store(&deployment{})
	h := o.Handlers
	h.Entities, h.Runner, h.Environment, h.Projects = e, e, e, e
	if h.Authorizer == nil {
		h.Authorizer = commandAuthorizer{e}
	}
	e.disp = command.NewDispatcher(h, log)
	return e, nil
}

// Stats returns the engine's counters.
func (e *Engine) Stats() *Stats { return &e.stats }

// Cache is the topic cache GET TOPIC reads.
func (e *Engine) Cache() *topiccache.Cache { return e.cache }

// Start installs what the store holds (running ON START actions), seeds
// the rules of a new broker, and starts listening for messages, commands
// and client events.
func (e *Engine) Start() error {
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.trig = e.o.Broker.NewClient(triggerClientID, broker.OriginLoT, e.onMessage)
	e.cmd = e.o.Broker.NewClient(commandClientID, broker.OriginBroker, e.onCommand)
	snapshot, version, cancel := e.o.Store.Watch(e.onApplied)
	e.unwatch = cancel
	e.loadKept()
	e.install(snapshot, nil)
	e.log.Info("LoT definitions loaded", "definitions", len(snapshot), "version", version)
	if e.o.SeedRules && version == 0 && len(snapshot) == 0 {
		if err := e.seedRules(); err != nil {
			e.log.Error("cannot store the seed rules", "err", err)
		}
	}
	if err := e.cmd.Subscribe(command.CommandTopic, 0); err != nil {
		return fmt.Errorf("runtime: subscribe to %s: %w", command.CommandTopic, err)
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.runEvents(e.ctx)
	}()
	if e.o.KeptFile != "" {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			e.runKeptSaver(e.ctx)
		}()
	}
	return nil
}

// Stop stops timers, event handling and the in-process clients.
func (e *Engine) Stop() {
	e.stopOnce.Do(func() {
		if e.cancel == nil {
			return
		}
		e.cancel()
		if e.unwatch != nil {
			e.unwatch()
		}
		e.sched.Stop()
		if e.trig != nil {
			e.trig.Close()
		}
		if e.cmd != nil {
			e.cmd.Close()
		}
		e.wg.Wait()
	})
}
