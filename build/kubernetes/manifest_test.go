package kubernetes

import (
	"bytes"
	"errors"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"gantry/appliance/config"
)

type envVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		FieldRef *struct {
			FieldPath string `yaml:"fieldPath"`
		} `yaml:"fieldRef"`
		SecretKeyRef *struct{ Name, Key string } `yaml:"secretKeyRef"`
	} `yaml:"valueFrom"`
}

type port struct {
	Name          string `yaml:"name"`
	Port          int    `yaml:"port"`
	ContainerPort int    `yaml:"containerPort"`
	TargetPort    string `yaml:"targetPort"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

type object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		// Service
		ClusterIP                string         `yaml:"clusterIP"`
		PublishNotReadyAddresses bool           `yaml:"publishNotReadyAddresses"`
		Selector                 map[string]any `yaml:"selector"` // a Service's labels; a StatefulSet's matchLabels
		Ports                    []port         `yaml:"ports"`
		// StatefulSet
		ServiceName string `yaml:"serviceName"`
		Replicas    int    `yaml:"replicas"`
		Template    struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				Containers []struct {
					Name           string   `yaml:"name"`
					Env            []envVar `yaml:"env"`
					Ports          []port   `yaml:"ports"`
					ReadinessProbe probe    `yaml:"readinessProbe"`
					LivenessProbe  probe    `yaml:"livenessProbe"`
					VolumeMounts   []struct {
						Name      string `yaml:"name"`
						MountPath string `yaml:"mountPath"`
					} `yaml:"volumeMounts"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
		VolumeClaimTemplates []struct {
			Metadata struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
		} `yaml:"volumeClaimTemplates"`
	} `yaml:"spec"`
}

func loadManifests(t *testing.T, path string) []object {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var objs []object
	for {
		var o object
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("%s: document %d: %v", path, len(objs)+1, err)
		}
		objs = append(objs, o)
	}
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// podEnv resolves the container's environment as the kubelet would for
// pod gantry-1 in namespace plant: field references, secrets and $(VAR)
// references to variables defined before.
func podEnv(t *testing.T, env []envVar) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range env {
		v := e.Value
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			v = map[string]string{"metadata.name": "gantry-1", "metadata.namespace": "plant"}[e.ValueFrom.FieldRef.FieldPath]
			if v == "" {
				t.Fatalf("env %s: fieldRef %s not known to the test", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			v = "secret-from-" + e.ValueFrom.SecretKeyRef.Name
		}
		v = varRef.ReplaceAllStringFunc(v, func(ref string) string {
			name := varRef.FindStringSubmatch(ref)[1]
			if r, ok := out[name]; ok {
				return r
			}
			t.Fatalf("env %s refers to $(%s), which is not defined before it", e.Name, name)
			return ""
		})
		out[e.Name] = v
	}
	return out
}

func TestStatefulSet(t *testing.T) {
	objs := loadManifests(t, "gantry.yaml")
	byKind := map[string][]object{}
	for _, o := range objs {
		byKind[o.Kind] = append(byKind[o.Kind], o)
	}
	if len(byKind["StatefulSet"]) != 1 {
		t.Fatalf("want one StatefulSet, have %d", len(byKind["StatefulSet"]))
	}
	sts := byKind["StatefulSet"][0]
	var headless *object
	for i, s := range byKind["Service"] {
		if s.Metadata.Name == sts.Spec.ServiceName {
			headless = &byKind["Service"][i]
		}
	}
	if headless == nil {
		t.Fatalf("StatefulSet serviceName %q names no Service", sts.Spec.ServiceName)
	}
	if headless.Spec.ClusterIP != "None" || !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s: clusterIP %q publishNotReadyAddresses %v, want a headless Service that lists pods before they are ready",
			headless.Metadata.Name, headless.Spec.ClusterIP, headless.Spec.PublishNotReadyAddresses)
	}
	labels := sts.Spec.Template.Metadata.Labels
	for _, s := range byKind["Service"] {
		for k, v := range s.Spec.Selector {
			if labels[k] != v && s.Kind == "Service" {
				t.Errorf("Service %s selects %s=%s, the pods are labelled %v", s.Metadata.Name, k, v, labels)
			}
		}
	}
	if sts.Spec.Replicas < 3 {
		t.Errorf("replicas %d: a cluster that survives one lost pod needs 3", sts.Spec.Replicas)
	}
	if len(sts.Spec.Template.Spec.Containers) != 1 {
		t.Fatal("want one container")
	}
	c := sts.Spec.Template.Spec.Containers[0]
	env := podEnv(t, c.Env)

	cfg, err := config.Load("", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatalf("the pod's environment does not load: %v", err)
	}
	if ps := cfg.ClusterProblems(); len(ps) > 0 {
		t.Fatalf("the pod's cluster configuration has problems:\n%s", strings.Join(ps, "\n"))
	}
	cl := cfg.Cluster
	if !cl.Enabled || cl.Discovery != config.DiscoveryKubernetes {
		t.Errorf("Cluster.Enabled %v Discovery %q, want kubernetes discovery on", cl.Enabled, cl.Discovery)
	}
	if cl.NodeName != "gantry-1" {
		t.Errorf("NodeName %q, want the pod name gantry-1", cl.NodeName)
	}
	if want := headless.Metadata.Name + ".plant.svc.cluster.local"; cl.KubernetesServiceDns != want {
		t.Errorf("KubernetesServiceDns %q, want the headless Service %q", cl.KubernetesServiceDns, want)
	}
	if want := "gantry-1." + headless.Metadata.Name + ".plant.svc.cluster.local"; cl.AdvertisedHost != want {
		t.Errorf("AdvertisedHost %q, want the pod's stable DNS name %q", cl.AdvertisedHost, want)
	}
	if !cfg.Durability.Enabled {
		t.Error("durability is off")
	}
	if cl.SharedSecret == "" {
		t.Error("no SharedSecret")
	}

	// DataDir (and the cluster's data under it) sits on the claim template's volume.
	mounted := ""
	for _, m := range c.VolumeMounts {
		for _, vc := range sts.Spec.VolumeClaimTemplates {
			if vc.Metadata.Name == m.Name && (cfg.DataDir == m.MountPath || strings.HasPrefix(cfg.DataDir, m.MountPath+"/")) {
				mounted = m.MountPath
			}
		}
	}
	if mounted == "" {
		t.Errorf("DataDir %s is not on a persistent volume from volumeClaimTemplates", cfg.DataDir)
	}
	if !strings.HasPrefix(cl.DataDir, mounted) {
		t.Errorf("Cluster.DataDir %s is not on the persistent volume %s", cl.DataDir, mounted)
	}

	// Ports: the container's named ports are the configured ones, and every
	// Service and probe refers to one of them.
	named := map[string]int{}
	for _, p := range c.Ports {
		named[p.Name] = p.ContainerPort
	}
	for name, want := range map[string]int{"mqtt": cfg.Mqtt.Port, "ops": cfg.Ops.Port, "cluster": cl.Port, "mqtt-ws": cfg.Mqtt.WebSocketPort} {
		if named[name] != want {
			t.Errorf("container port %s = %d, the configuration listens on %d", name, named[name], want)
		}
	}
	if cl.KubernetesPeerPort != named["cluster"] {
		t.Errorf("KubernetesPeerPort %d, the cluster port is %d", cl.KubernetesPeerPort, named["cluster"])
	}
	for _, s := range byKind["Service"] {
		for _, p := range s.Spec.Ports {
			if _, ok := named[p.TargetPort]; !ok {
				t.Errorf("Service %s port %s targets %q, not a container port", s.Metadata.Name, p.Name, p.TargetPort)
			}
		}
	}
	if c.ReadinessProbe.HTTPGet.Path != "/health/ready" || c.ReadinessProbe.HTTPGet.Port != "ops" {
		t.Errorf("readiness probe %+v, want GET /health/ready on ops", c.ReadinessProbe.HTTPGet)
	}
	if c.LivenessProbe.HTTPGet.Path != "/health" || c.LivenessProbe.HTTPGet.Port != "ops" {
		t.Errorf("liveness probe %+v, want GET /health on ops", c.LivenessProbe.HTTPGet)
	}
}

// TestContainerfile: the image runs the static binary as a non-root user
// with DataDir on a volume, and exposes the ports the manifests use.
func TestContainerfile(t *testing.T) {
	data, err := os.ReadFile("../../Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	instr := map[string][]string{}
	var cont string
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = cont + line
		if strings.HasSuffix(line, "\\") {
			cont = strings.TrimSuffix(line, "\\") + " "
			continue
		}
		cont = ""
		k, v, _ := strings.Cut(line, " ")
		instr[strings.ToUpper(k)] = append(instr[strings.ToUpper(k)], strings.TrimSpace(v))
	}
	if got := instr["FROM"]; len(got) != 1 || got[0] != "scratch" {
		t.Errorf("FROM %v, want scratch (the binary is static)", got)
	}
	if got := instr["COPY"]; len(got) != 1 || !strings.HasPrefix(got[0], "bin/gantry-${TARGETARCH}${TARGETVARIANT} ") {
		t.Errorf("COPY %v, want the cross-built bin/gantry-<arch>", got)
	}
	if got := instr["USER"]; len(got) != 1 || strings.HasPrefix(got[0], "0") || got[0] == "root" {
		t.Errorf("USER %v, want a non-root uid", got)
	}
	env := map[string]string{}
	for _, e := range instr["ENV"] {
		for _, kv := range strings.Fields(e) {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	}
	cfg, err := config.Load("", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatalf("the image's environment does not load: %v", err)
	}
	if !slices.Contains(instr["VOLUME"], `["`+cfg.DataDir+`"]`) {
		t.Errorf("VOLUME %v, want DataDir %s on a volume", instr["VOLUME"], cfg.DataDir)
	}
	exposed := strings.Fields(strings.Join(instr["EXPOSE"], " "))
	for _, p := range []int{cfg.Mqtt.Port, cfg.Ops.Port, cfg.Cluster.Port} {
		if !slices.Contains(exposed, strconv.Itoa(p)) {
			t.Errorf("EXPOSE %v lacks %d", exposed, p)
		}
	}
	if got := instr["ENTRYPOINT"]; len(got) != 1 || got[0] != `["/gantry"]` {
		t.Errorf("ENTRYPOINT %v", got)
	}
}
