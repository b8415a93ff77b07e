// Package kubernetes_test checks the manifests in this directory the way
// the API server would take them: every object decoded into its
// Kubernetes type with unknown fields refused, every SECKILL_ variable
// one the programs read, every image one make image builds, and the
// shapes the operations rely on (probes, a grace period longer than the
// drain, one cache-invalidator, the api's disruption budget and
// autoscaler). A module of its own: the Kubernetes types stay out of the
// programs' dependencies.
package kubernetes_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"

	"github.com/seckill/seckill/internal/config"
)

// objects are the manifests' objects by kind and name.
type objects struct {
	deployments  map[string]*appsv1.Deployment
	statefulSets map[string]*appsv1.StatefulSet
	services     map[string]*corev1.Service
	configMaps   map[string]*corev1.ConfigMap
	secrets      map[string]*corev1.Secret
	budgets      map[string]*policyv1.PodDisruptionBudget
	autoscalers  map[string]*autoscalingv2.HorizontalPodAutoscaler
	namespaces   int
}

// strict decodes one document into out, refusing any field its type
// does not have (a misspelt field would be dropped by a lenient decoder
// and by kubectl apply without --validate=strict).
func strict(doc []byte, out any) error {
	raw, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(out)
}

func load(t *testing.T) objects {
	t.Helper()
	o := objects{deployments: map[string]*appsv1.Deployment{}, statefulSets: map[string]*appsv1.StatefulSet{},
		services: map[string]*corev1.Service{}, configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{},
		budgets: map[string]*policyv1.PodDisruptionBudget{}, autoscalers: map[string]*autoscalingv2.HorizontalPodAutoscaler{}}
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(raw), -1) {
			if strings.TrimSpace(regexp.MustCompile(`(?m)^#.*$`).ReplaceAllString(doc, "")) == "" {
				continue
			}
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name, Namespace string
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s, document %d: %v", f, i+1, err)
			}
			where := fmt.Sprintf("%s: %s %s", f, head.Kind, head.Metadata.Name)
			if head.Kind != "Namespace" && head.Metadata.Namespace != "seckill" {
				t.Errorf("%s: namespace %q, want seckill", where, head.Metadata.Namespace)
			}
			var into any
			switch head.APIVersion + " " + head.Kind {
			case "v1 Namespace":
				into, o.namespaces = &corev1.Namespace{}, o.namespaces+1
			case "apps/v1 Deployment":
				d := &appsv1.Deployment{}
				into, o.deployments[head.Metadata.Name] = d, d
			case "apps/v1 StatefulSet":
				s := &appsv1.StatefulSet{}
				into, o.statefulSets[head.Metadata.Name] = s, s
			case "v1 Service":
				s := &corev1.Service{}
				into, o.services[head.Metadata.Name] = s, s
			case "v1 ConfigMap":
				c := &corev1.ConfigMap{}
				into, o.configMaps[head.Metadata.Name] = c, c
			case "v1 Secret":
				s := &corev1.Secret{}
				into, o.secrets[head.Metadata.Name] = s, s
			case "policy/v1 PodDisruptionBudget":
				b := &policyv1.PodDisruptionBudget{}
				into, o.budgets[head.Metadata.Name] = b, b
			case "autoscaling/v2 HorizontalPodAutoscaler":
				h := &autoscalingv2.HorizontalPodAutoscaler{}
				into, o.autoscalers[head.Metadata.Name] = h, h
			default:
				t.Fatalf("%s: %s %s is not a type this test knows", where, head.APIVersion, head.Kind)
			}
			if err := strict([]byte(doc), into); err != nil {
				t.Errorf("%s: %v", where, err)
			}
		}
	}
	return o
}

// read is every variable the programs ask for, in either session mode.
func read() map[string]bool {
	known := map[string]bool{}
	for _, mode := range []string{"redis", "jwt"} {
		asked := func(k string) (string, bool) {
			known[k] = true
			if k == "SECKILL_SESSION_MODE" {
				return mode, true
			}
			return "", false
		}
		_, _ = config.LoadAPI(asked)
		_, _ = config.LoadOrderWriter(asked)
		_, _ = config.LoadCacheInvalidator(asked)
	}
	return known
}

// pods are the programs' pod templates, by program.
func (o objects) pods() map[string]corev1.PodTemplateSpec {
	pods := map[string]corev1.PodTemplateSpec{}
	for name, d := range o.deployments {
		pods[name] = d.Spec.Template
	}
	for name, s := range o.statefulSets {
		pods[name] = s.Spec.Template
	}
	return pods
}

func TestManifestsDecodeStrictly(t *testing.T) {
	o := load(t)
	if o.namespaces != 1 {
		t.Errorf("%d namespaces, want the one", o.namespaces)
	}
	for _, want := range []string{"api", "order-writer", "cache-invalidator"} {
		if _, ok := o.pods()[want]; !ok {
			t.Errorf("no workload for %s", want)
		}
	}
}

func TestManifestsSetOnlyVariablesTheProgramsRead(t *testing.T) {
	o, known := load(t), read()
	check := func(where, name string) {
		if strings.HasPrefix(name, "SECKILL_") && !known[name] {
			t.Errorf("%s sets %s, which no program reads", where, name)
		}
	}
	for name, c := range o.configMaps {
		for k := range c.Data {
			check("ConfigMap "+name, k)
		}
	}
	for name, s := range o.secrets {
		for k := range s.StringData {
			check("Secret "+name, k)
		}
	}
	for program, p := range o.pods() {
		for _, c := range p.Spec.Containers {
			for _, e := range c.Env {
				check(program, e.Name)
			}
			for _, from := range c.EnvFrom {
				if r := from.ConfigMapRef; r != nil && o.configMaps[r.Name] == nil {
					t.Errorf("%s reads ConfigMap %s, which the manifests lack", program, r.Name)
				}
				if r := from.SecretRef; r != nil && o.secrets[r.Name] == nil {
					t.Errorf("%s reads Secret %s, which the manifests lack", program, r.Name)
				}
			}
		}
	}
	// And the values the programs would refuse at start.
	env := map[string]string{}
	for _, c := range o.configMaps {
		for k, v := range c.Data {
			env[k] = v
		}
	}
	env["SECKILL_SESSION_MODE"] = "redis" // the keys file is a placeholder
	if _, err := config.LoadOrderWriter(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Errorf("the ConfigMap's values: %v", err)
	}
}

// images are the images make image builds: localhost/seckill/<program>
// for each program of its IMAGES line.
func images(t *testing.T) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^IMAGES := (.+)$`).FindStringSubmatch(string(raw))
	if m == nil {
		t.Fatal("the Makefile has no IMAGES line")
	}
	out := map[string]bool{}
	for _, p := range strings.Fields(m[1]) {
		out["localhost/seckill/"+p] = true
	}
	if !regexp.MustCompile(`-t localhost/seckill/\$\$p\b`).Match(raw) {
		t.Fatal("make image no longer tags localhost/seckill/<program>: update this test and the manifests")
	}
	return out
}

func TestManifestsNameTheImagesMakeImageBuilds(t *testing.T) {
	o, built := load(t), images(t)
	for program, p := range o.pods() {
		for _, c := range p.Spec.Containers {
			if !built[c.Image] {
				t.Errorf("%s runs image %q, which make image does not build (%v)", program, c.Image, built)
			}
			if c.Image != "localhost/seckill/"+program {
				t.Errorf("%s runs %q, another program's image", program, c.Image)
			}
		}
	}
}

func TestManifestsShapes(t *testing.T) {
	o := load(t)
	drain := 15 * time.Second // SECKILL_SHUTDOWN_TIMEOUT's default
	for program, p := range o.pods() {
		c := p.Spec.Containers[0]
		if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
			t.Errorf("%s: no /readyz readiness probe", program)
		}
		if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
			t.Errorf("%s: no /healthz liveness probe", program)
		}
		wait := drain
		for _, e := range c.Env {
			if e.Name == "SECKILL_SHUTDOWN_TIMEOUT" {
				if wait, _ = time.ParseDuration(e.Value); wait == 0 {
					t.Errorf("%s: SECKILL_SHUTDOWN_TIMEOUT %q", program, e.Value)
				}
			}
		}
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
			wait += time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
		}
		if g := p.Spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= wait {
			t.Errorf("%s: a grace period of %v, not longer than its drain (%v)", program, g, wait)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
			t.Errorf("%s: no CPU or memory request", program)
		}
		if sc := p.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Errorf("%s: not refused to run as root", program)
		}
	}
	api := o.deployments["api"]
	if api == nil {
		t.Fatal("no api Deployment")
	}
	if api.Spec.Template.Spec.Containers[0].Lifecycle == nil {
		t.Error("api: no preStop pause for the endpoints to drop the pod before it stops taking requests")
	}
	if b := o.budgets["api"]; b == nil || b.Spec.Selector == nil || b.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != "api" {
		t.Error("no PodDisruptionBudget for the api")
	}
	if h := o.autoscalers["api"]; h == nil || h.Spec.ScaleTargetRef.Kind != "Deployment" || h.Spec.ScaleTargetRef.Name != "api" {
		t.Error("no HorizontalPodAutoscaler for the api Deployment")
	}
	inv := o.statefulSets["cache-invalidator"]
	if inv == nil || inv.Spec.Replicas == nil || *inv.Spec.Replicas != 1 || len(inv.Spec.VolumeClaimTemplates) != 1 {
		t.Error("the cache-invalidator is not one StatefulSet pod with a volume for its position")
	}
	if _, ok := o.deployments["cache-invalidator"]; ok {
		t.Error("the cache-invalidator as a Deployment: a rollout would run two at once")
	}
}
