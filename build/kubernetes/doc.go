// Package kubernetes holds Gantry's Kubernetes manifests (gantry.yaml: a
// StatefulSet with a headless Service for kubernetes discovery) and the
// test that checks them, together with the Containerfile at the root of
// the repository, against the configuration loader: the environment the
// pods get must load, cluster included, with the ports the probes and
// Services use.
package kubernetes
