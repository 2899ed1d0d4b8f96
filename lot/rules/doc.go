// Package rules decides access with LoT rules (DEFINE RULE, LOT.md §6): may
// this client connect, publish to this topic, subscribe to this filter, run
// this management command?
//
// It owns the rule types (Rule, Cond, Scope, Effect), their validation and
// compilation into an immutable Set, the evaluation of a Request into a
// Decision, the Engine that swaps sets atomically, and the seed and
// built-in rules. It knows nothing of LoT syntax: the runtime turns parsed
// DEFINE RULE definitions into Rule values. Topic matching is
// gantry/broker/topic's.
//
// # Evaluation
//
// Set.Evaluate follows the model Gantry adopted (LOT.md §6.4):
//
//   - a User with Admin set is always allowed (anti-lockout; the broker's
//     root has it);
//   - among the rules of the request's Scope that match, those with the
//     lowest priority number decide, and DENY wins a tie;
//   - nothing matching denies.
//
// A rule matches when its TO TOPIC filter applies to the request's topic and
// it yields an effect: an unconditional rule always does, IF c THEN e does
// when c holds, IF c THEN e ELSE f always does. So a false condition
// without ELSE lets evaluation go on to the next priority.
//
// A publish is matched with topic.Matches. A subscription carries a filter,
// which stands for every topic it can match: an ALLOW applies only when the
// rule's filter covers the whole subscription filter, a DENY as soon as the
// two share a topic. "x/#" allowed does not let "#" through, "x/#" denied
// refuses "#". A $share/{group}/ prefix is ignored.
//
// Scopes are classified by PublishScope and SubscribeScope: a publish to
// $SYS/Coreflux/Command is CommandCall, to any other '$' topic PublishSys; a
// subscription whose filter starts with '$' is SubscribeSys. Management
// scopes (ActionManagementCreation, ...) carry no topic.
//
// Priorities below Options.ReservedBelow are reserved to Builtin rules; the
// default reserves nothing, as Gantry decided (PRIORITY 1 is accepted).
// Seeds returns the three removable rules a new broker starts with;
// Builtins the locked ones that grant what the permission flags promise.
//
// # Cost
//
// Evaluate runs on every publish. It does not allocate, takes no lock and
// rejects rules about other topics by their first level before matching;
// its cost grows with the rules of the request's scope up to the deciding
// priority. See BenchmarkEvaluate.
//
// # Concurrency
//
// A Set is immutable once compiled and safe for concurrent use. Engine holds
// the current Set in an atomic pointer: Evaluate may run on any number of
// goroutines while Load or Swap installs a new set; each call sees one set
// whole. A Request and the User it points to are read, never written, and
// must not change during the call. TopicReader implementations are called
// from the evaluating goroutine and must be safe for concurrent use.
package rules
