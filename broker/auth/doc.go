// Package auth holds Gantry's users and checks their credentials. Access
// rules are LoT's (lot/rules, enforced by lot/runtime).
//
// Store keeps users in DataDir/users.json (mode 0600), each with a bcrypt
// hash of the password, an administrator flag, the permission flags the
// access rules test with USER HAS (KnownFlags) and the groups they test
// with USER IN GROUP: one record per user, so that whoever replicates the
// store replicates all of it. The file is the only
// state: the gantry command edits it while the node is stopped or running
// (each change takes an exclusive flock on users.json.lock, re-reads the
// file, writes a temporary file, fsyncs and renames it), and a running
// node notices the change by the file's size and modification time on the
// next authentication.
//
// On a clustered node the users are the cluster's (replica.go): every
// change goes through a Replicator instead of the file, and the cluster's
// committed set is written into users.json with a ClusterMark
// (AdoptCluster), which a change made on the file itself drops; a file
// without the mark that differs is backed up before the cluster's set
// replaces it.
//
// Authenticator implements broker.Authenticator: it verifies the password,
// delays every failure and throttles a source address after a burst of
// failures (Throttle). Successful verifications are cached for a short
// time under an HMAC of the password with a per-process key, so a
// reconnect storm does not cost one bcrypt hash per client.
//
// All types are safe for concurrent use.
package auth
