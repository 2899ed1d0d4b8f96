package auth

import (
	"strings"

	"gantry/broker"
	"gantry/broker/topic"
)

// Rules are the built-in access rules (see the package documentation).
type Rules struct {
	store *Store
}

// NewRules returns the built-in rules over store (nil: nobody is an
// administrator).
func NewRules(store *Store) *Rules { return &Rules{store: store} }

// statsPrefixes are the $SYS subtrees every user may read.
var statsPrefixes = []string{"$SYS/broker/", "$SYS/Coreflux/Cluster/"}

func (r *Rules) admin(info *broker.ConnInfo) bool {
	if info.Username == "" || r.store == nil {
		return false
	}
	u, ok := r.store.Lookup(info.Username)
	return ok && u.Admin
}

// CanPublish implements broker.Authorizer.
func (r *Rules) CanPublish(info *broker.ConnInfo, tp string) bool {
	if !isSys(tp) {
		return true
	}
	return r.admin(info)
}

// CanSubscribe implements broker.Authorizer.
func (r *Rules) CanSubscribe(info *broker.ConnInfo, filter string) bool {
	if _, inner, shared, err := topic.ParseShared(filter); err == nil && shared {
		filter = inner
	}
	if !strings.HasPrefix(filter, "$") {
		return true // wildcards at the first level never match $ topics
	}
	if r.admin(info) {
		return true
	}
	for _, p := range statsPrefixes {
		if strings.HasPrefix(filter, p) || filter == strings.TrimSuffix(p, "/")+"/#" {
			return true
		}
	}
	return false
}

func isSys(tp string) bool { return tp == "$SYS" || strings.HasPrefix(tp, "$SYS/") }
