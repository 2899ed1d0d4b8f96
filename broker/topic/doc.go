// Package topic owns MQTT topic syntax and topic matching for the Gantry
// broker: checking topic names and filters, splitting shared subscription
// filters, the subscription tree that finds the subscribers of a PUBLISH,
// and the topic index that finds the retained messages of a SUBSCRIBE.
// It uses the standard library and the types of gantry/broker/packet
// (SubOptions, and ReasonCode as the error it returns), nothing else.
//
// # Syntax
//
// A topic name (ValidateName) is 1 to 65535 bytes of well-formed UTF-8
// without U+0000 and without the wildcards '+' and '#'. A topic filter
// (ValidateFilter) has the same encoding rules, '+' only as a whole level
// and '#' only as the whole last level. Levels are separated by '/' and
// may be empty: "a//b" has three levels, "a/" has two, "/" has two.
// ParseShared splits $share/{group}/{filter}; the group is non-empty and
// free of '+', '#' and '/'. Errors are packet.TopicNameInvalid and
// packet.TopicFilterInvalid, which the broker sends as reason codes.
//
// # Matching
//
// Matches is the reference matcher for one (filter, topic) pair; the Tree
// and the Index give the same answers (a property test and the FuzzMatch
// target hold them to it). The rules are those of MQTT 5.0 section 4.7:
//
//   - '+' matches exactly one level, which may be empty;
//   - '#' matches any number of levels, including none: "sport/#" matches
//     "sport" as well as "sport/tennis/player1";
//   - a filter whose first level is '+' or '#' matches no topic starting
//     with '$' ("#" does not see "$SYS/uptime", "$SYS/#" does);
//   - a shared filter $share/{group}/{inner} matches as inner.
//
// Every matcher walks levels by index and never splits strings.
//
// # Tree
//
// Tree[C] holds subscriptions, keyed by (Client, Filter). Its invariants:
//
//   - at most one Entry per (Client, Filter); Subscribe replaces and says so;
//   - an Entry stored in the tree is never modified: replacing stores a new
//     one, so a *Entry returned by Match is an immutable snapshot that can be
//     read without locks, current until its subscription is unsubscribed or
//     replaced;
//   - every trie node other than the root holds an entry or leads to one,
//     and every share group has at least one member: Unsubscribe and
//     RemoveClient prune, and Nodes returns to 0 when the tree is emptied;
//   - Count is the number of entries.
//
// Match appends every matching plain entry and one member per matching
// share group, round robin, optionally restricted by an accept function
// (for instance "is online"); if accept admits no member the round-robin
// member is returned anyway. It allocates nothing when dst has room,
// whatever the number of subscribers, and its cost depends on the topic's
// depth and the matching subscriptions, not on unrelated filters.
//
// # Index
//
// Index[V] maps topic names to values (retained messages). Match visits the
// stored topics a filter matches, Range visits them all; both stop when the
// callback returns false. Empty nodes are pruned on Delete.
//
// # Use
//
// The broker's side of the contract, in outline:
//
//	// SUBSCRIBE, per filter:
//	_, _, shared, err := topic.ParseShared(sub.Filter) // err: the SUBACK reason code
//	existed := tree.Subscribe(topic.Entry[*session]{Client: s, Filter: sub.Filter,
//		Options: sub.Options, SubID: id})
//	if !shared && (sub.Options.RetainHandling == 0 || (sub.Options.RetainHandling == 1 && !existed)) {
//		retained.Match(sub.Filter, collect) // then send what collect gathered
//	}
//
//	// PUBLISH (after topic.ValidateName):
//	dst = tree.Match(name, dst[:0], online) // online: a func(*session) bool
//	// copy what is needed from each *Entry, deliver, keep dst for the next message
//
//	// end of a session that is not kept:
//	tree.RemoveClient(s, s.filters)
//
// Subscribe derives Entry.Group from the filter; retained messages are not
// sent on a shared subscription (MQTT 5.0 section 4.8.2).
//
// # Concurrency
//
// Tree and Index are safe for concurrent use and their zero values are
// ready to use. Each holds a sync.RWMutex:
//
//   - Tree.Match takes the read lock, so publishers match in parallel; the
//     round-robin counters of share groups are atomics advanced under it.
//     Subscribe, Unsubscribe and RemoveClient take the write lock. Count and
//     Nodes read atomic counters and take no lock.
//   - Index.Get, Len, Match and Range take the read lock; Set and Delete
//     the write lock.
//
// Callbacks (Tree.Match's accept, Index.Match's and Range's fn) run under
// the read lock and must not call back into the same Tree or Index: a
// write would deadlock, and a nested read can deadlock behind a writer that
// is waiting. They should be short; copy what is needed and act afterwards.
package topic
