package runtime

import (
	"context"
	"strings"

	"gantry/broker"
	"gantry/broker/topic"
	"gantry/lot/interp"
	"gantry/lot/syntax"
)

// Observe implements broker.Observer: client events are queued for the
// event goroutine (the broker's goroutine must not block).
func (e *Engine) Observe(ev broker.Event) {
	if ev.Kind == broker.EventUnsubscribe || strings.HasPrefix(ev.ClientID, "$") {
		return // the node's own in-process clients (the engine's among them)
	}
	if d := e.dep.Load(); len(d.onSession[0])+len(d.onSession[1])+len(d.onSession[2]) == 0 {
		return
	}
	select {
	case e.events <- ev:
	default:
		e.stats.EventsDropped.Add(1)
	}
}

// runEvents runs ON CONNECT, ON DISCONNECT and ON SUBSCRIBE actions.
func (e *Engine) runEvents(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-e.events:
			e.handleEvent(ev)
		}
	}
}

func (e *Engine) handleEvent(ev broker.Event) {
	if len(ev.ClientID) > 0 && ev.ClientID[0] == '$' {
		return // the broker's own in-process clients
	}
	var kind syntax.TriggerKind
	switch ev.Kind {
	case broker.EventConnect:
		kind = syntax.TriggerConnect
	case broker.EventDisconnect:
		kind = syntax.TriggerDisconnect
	default:
		kind = syntax.TriggerSubscribe
	}
	s := interp.Session{ClientID: ev.ClientID, User: ev.Username, Endpoint: ev.Remote,
		SubscribeTopic: ev.Filter, SubscribeQoS: ev.QoS, CleanSession: ev.CleanStart}
	if ev.Reason != nil {
		s.DisconnectReason = ev.Reason.Error()
	}
	for _, a := range e.dep.Load().onSession[sessionIndex(kind)] {
		if kind == syntax.TriggerSubscribe && a.filter != "" && !filterCovers(a.filter, ev.Filter) {
			continue
		}
		e.runAction(a, &interp.Event{Session: s}, 0)
	}
}

// filterCovers reports whether an ON SUBSCRIBE filter applies to a
// subscription: the same filter, or one whose topics the trigger matches.
func filterCovers(trigger, filter string) bool {
	return trigger == filter || topic.Matches(trigger, filter)
}
