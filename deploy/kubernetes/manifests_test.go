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
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/seckill/seckill/internal/botcheck"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/jwtauth"
	"github.com/seckill/seckill/internal/tlscert"
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
	jobs         map[string]*batchv1.Job
	policies     map[string]*networkingv1.NetworkPolicy
	namespaces   int
}

// strict decodes one document into out as the API server's strict
// field validation does: a field its type does not have, a field written
// in another case, a field given twice are each an error (a lenient
// decoder, and kubectl apply without --validate=strict, would drop or
// merge them). A key given twice is refused by the YAML conversion
// itself: a lenient one keeps the last, and the JSON decode never sees
// the first.
func strict(doc []byte, out any) error {
	raw, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strictErrs, err := kjson.UnmarshalStrict(raw, out)
	return errors.Join(append(strictErrs, err)...)
}

func load(t *testing.T) objects {
	t.Helper()
	o := objects{deployments: map[string]*appsv1.Deployment{}, statefulSets: map[string]*appsv1.StatefulSet{},
		services: map[string]*corev1.Service{}, configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{},
		budgets: map[string]*policyv1.PodDisruptionBudget{}, autoscalers: map[string]*autoscalingv2.HorizontalPodAutoscaler{},
		jobs: map[string]*batchv1.Job{}, policies: map[string]*networkingv1.NetworkPolicy{}}
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	// kubectl apply -f takes .yml and .json too: all of them are .yaml
	// here, so that this test sees every one.
	for _, pattern := range []string{"*.yml", "*.json"} {
		if other, _ := filepath.Glob(pattern); len(other) > 0 {
			t.Fatalf("%v: name manifests .yaml, which this test reads", other)
		}
	}
	// The Secrets' shapes, which kubectl apply -f on the directory leaves
	// alone, decoded all the same.
	files = append(files, "secrets.yaml.example")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range regexp.MustCompile(`(?m)^---.*$`).Split(string(raw), -1) {
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
			case "batch/v1 Job":
				j := &batchv1.Job{}
				into, o.jobs[head.Metadata.Name] = j, j
			case "networking.k8s.io/v1 NetworkPolicy":
				n := &networkingv1.NetworkPolicy{}
				into, o.policies[head.Metadata.Name] = n, n
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
	for name := range config.Variables() {
		known[name] = true
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
	// A Job is named by the release: its program is its pods' name label.
	for _, j := range o.jobs {
		pods[j.Spec.Template.Labels["app.kubernetes.io/name"]] = j.Spec.Template
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
		for k := range s.Data {
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
	for program, load := range loaders(t) {
		env := o.env(t, program)
		if err := load(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
			t.Errorf("%s with the manifests' configuration (the Secrets' placeholders filled in): %v", program, err)
		}
	}
}

// loaders are each workload's configuration loader: what the program
// reads at start, and refuses.
func loaders(t *testing.T) map[string]func(config.Lookup) error {
	return map[string]func(config.Lookup) error{
		"api":               func(l config.Lookup) error { _, err := config.LoadAPI(l); return err },
		"order-writer":      func(l config.Lookup) error { _, err := config.LoadOrderWriter(l); return err },
		"cache-invalidator": func(l config.Lookup) error { _, err := config.LoadCacheInvalidator(l); return err },
		"migrate":           func(l config.Lookup) error { _, err := config.MySQLDSN(l); return err },
	}
}

// env is what program's container sees: its ConfigMaps and Secrets, then
// its own variables; the Secrets' placeholders replaced by what a deployer
// puts there (an admin token of 32 characters, a JWT keyring, a
// certificate), the mounted files' paths by the test's own files.
func (o objects) env(t *testing.T, program string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	spec, err := jwtauth.NewKeySpec("k8s-test", jwtauth.HS256)
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := json.Marshal(map[string]any{"sign": "k8s-test", "keys": []any{spec}})
	keyFile := filepath.Join(dir, "keys.json")
	if err := os.WriteFile(keyFile, keys, 0o600); err != nil {
		t.Fatal(err)
	}
	cert, key, err := tlscert.WriteDev(dir, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pathKeys := filepath.Join(dir, "path-keys.json")
	if _, err := botcheck.RotateKeyFile(pathKeys); err != nil {
		t.Fatal(err)
	}
	real := map[string]string{"SECKILL_ADMIN_TOKEN": strings.Repeat("x", 32), "SECKILL_API_TRUSTED_PROXIES": "10.0.5.0/28",
		"/etc/seckill/jwt/keys.json": keyFile, "/etc/seckill/tls/tls.crt": cert, "/etc/seckill/tls/tls.key": key,
		"/etc/seckill/botcheck/keys.json": pathKeys}
	fill := func(v string) string {
		if r, ok := real[v]; ok {
			return r
		}
		return v
	}
	env := map[string]string{}
	c := o.pods()[program].Spec.Containers[0]
	for _, from := range c.EnvFrom {
		if r := from.ConfigMapRef; r != nil && o.configMaps[r.Name] != nil {
			for k, v := range o.configMaps[r.Name].Data {
				env[k] = v
			}
		}
		if r := from.SecretRef; r != nil && o.secrets[r.Name] != nil {
			for k, v := range o.secrets[r.Name].StringData {
				env[k] = v
			}
		}
	}
	if token, ok := env["SECKILL_ADMIN_TOKEN"]; ok && len(token) >= 16 {
		t.Errorf("%s: the admin token's placeholder %q would be taken: keep it short, so that a forgotten one stops the api", program, token)
	}
	for _, k := range []string{"SECKILL_ADMIN_TOKEN", "SECKILL_API_TRUSTED_PROXIES"} {
		if _, ok := env[k]; ok {
			env[k] = real[k]
		}
	}
	for _, e := range c.Env {
		env[e.Name] = fill(e.Value)
	}
	return env
}

// checkProbe fails unless probe asks one of the container's declared
// ports that the program listens on, by the scheme it serves there.
func checkProbe(t *testing.T, program, what string, c corev1.Container, probe *corev1.Probe, env map[string]string) {
	t.Helper()
	if probe == nil || probe.HTTPGet == nil {
		return // the path checks below say so
	}
	var port int32
	for _, p := range c.Ports {
		if p.Name == probe.HTTPGet.Port.String() || probe.HTTPGet.Port.IntVal == p.ContainerPort {
			port = p.ContainerPort
		}
	}
	if port == 0 {
		t.Errorf("%s: the %s probe asks port %s, which the container does not declare", program, what, probe.HTTPGet.Port.String())
		return
	}
	listens := map[string]string{"SECKILL_ADMIN_ADDR": "HTTP"}
	if program == "api" {
		listens["SECKILL_API_ADDR"] = "HTTP"
		if env["SECKILL_TLS_CERT"] != "" {
			listens["SECKILL_API_ADDR"] = "HTTPS"
		}
	}
	for name, scheme := range listens {
		host, p, err := net.SplitHostPort(env[name])
		if err != nil || p != strconv.Itoa(int(port)) {
			continue
		}
		if host != "" && host != "0.0.0.0" && host != "::" {
			t.Errorf("%s: the %s probe asks port %d, where %s=%s listens on %s only", program, what, port, name, env[name], host)
		}
		if got := string(probe.HTTPGet.Scheme); cmpOr(got, "HTTP") != scheme {
			t.Errorf("%s: the %s probe asks port %d by %s, which serves %s", program, what, port, cmpOr(got, "HTTP"), scheme)
		}
		return
	}
	t.Errorf("%s: the %s probe asks port %d, where the program does not listen", program, what, port)
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// images are the images make image builds, localhost/seckill/<program>:
// <version> for each program of its IMAGES line, and that version (its
// VERSION line).
func images(t *testing.T) (built map[string]bool, version string) {
	t.Helper()
	raw, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^IMAGES := (.+)$`).FindStringSubmatch(string(raw))
	v := regexp.MustCompile(`(?m)^VERSION := (\S+)$`).FindStringSubmatch(string(raw))
	if m == nil || v == nil {
		t.Fatal("the Makefile has no IMAGES or VERSION line")
	}
	built = map[string]bool{}
	for _, p := range strings.Fields(m[1]) {
		built["localhost/seckill/"+p+":"+v[1]] = true
	}
	if !regexp.MustCompile(`-t localhost/seckill/\$\$p:\$\(VERSION\)`).Match(raw) {
		t.Fatal("make image no longer tags localhost/seckill/<program>:$(VERSION): update this test and the manifests")
	}
	return built, v[1]
}

func TestManifestsNameTheImagesMakeImageBuilds(t *testing.T) {
	o := load(t)
	built, version := images(t)
	for program, p := range o.pods() {
		for _, c := range p.Spec.Containers {
			if !built[c.Image] {
				t.Errorf("%s runs image %q, which make image does not build (%v)", program, c.Image, built)
			}
			want := program
			if program == "migrate" {
				want = "seckillctl"
			}
			if c.Image != "localhost/seckill/"+want+":"+version {
				t.Errorf("%s runs %q, another program's image", program, c.Image)
			}
		}
	}
}

func TestManifestsShapes(t *testing.T) {
	o := load(t)
	drain := 15 * time.Second // SECKILL_SHUTDOWN_TIMEOUT's default
	for program, p := range o.pods() {
		if program == "migrate" {
			continue
		}
		c := p.Spec.Containers[0]
		env := o.env(t, program)
		checkProbe(t, program, "readiness", c, c.ReadinessProbe, env)
		checkProbe(t, program, "liveness", c, c.LivenessProbe, env)
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
	for name, b := range o.budgets {
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if d := o.deployments[name]; err != nil || d == nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("PodDisruptionBudget %s does not select the pods of Deployment %s (%v)", name, name, err)
		}
	}
	if o.budgets["api"] == nil {
		t.Error("no PodDisruptionBudget for the api")
	}
	checkPathKeysFromASecret(t, o, api)
	if api.Spec.Replicas != nil {
		t.Error("api: replicas set beside its autoscaler: every apply resets the count")
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

// checkPathKeysFromASecret fails unless the api reads the order paths'
// keys from a file in a mounted Secret that secrets.yaml.example declares,
// with a key field: in production they are not in Redis.
func checkPathKeysFromASecret(t *testing.T, o objects, api *appsv1.Deployment) {
	t.Helper()
	spec := api.Spec.Template.Spec
	var file string
	for _, e := range spec.Containers[0].Env {
		if e.Name == "SECKILL_BOTCHECK_KEYS_FILE" {
			file = e.Value
		}
	}
	if file == "" {
		t.Error("api: the order paths' keys are left in Redis (no SECKILL_BOTCHECK_KEYS_FILE)")
		return
	}
	for _, m := range spec.Containers[0].VolumeMounts {
		if filepath.Dir(file) != m.MountPath {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			if s := o.secrets[v.Secret.SecretName]; s == nil || s.StringData[filepath.Base(file)] == "" {
				t.Errorf("api: the paths' keys' Secret %s has no %s in secrets.yaml.example", v.Secret.SecretName, filepath.Base(file))
			}
			return
		}
	}
	t.Errorf("api: SECKILL_BOTCHECK_KEYS_FILE=%s is not in a mounted Secret", file)
}

// Each readiness probe asks the endpoint whose answer means "this program
// can do its own job". The api's asks where its Service sends the buyers:
// its public /readyz, ready while Redis and the orders topic answer and
// still ready, degraded, without MySQL, so a MySQL outage leaves the
// Service its endpoints. The daemons' ask their admin listener, their
// only one, ready while what their job needs answers (the order-writer:
// Kafka, MySQL, Redis; the cache-invalidator: the binlog, Redis, Kafka).
// Liveness asks the admin listener, which a saturated sale does not
// queue behind.
func TestManifestsProbesAskWhatReadinessMeans(t *testing.T) {
	o := load(t)
	for program, p := range o.pods() {
		if program == "migrate" {
			continue
		}
		c := p.Spec.Containers[0]
		want := "admin"
		if program == "api" {
			svc := o.services["api"]
			if svc == nil || len(svc.Spec.Ports) != 1 {
				t.Fatal("no api Service with one port")
			}
			want = svc.Spec.Ports[0].TargetPort.String()
		}
		if r := c.ReadinessProbe; r == nil || r.HTTPGet == nil || r.HTTPGet.Port.String() != want || r.HTTPGet.Path != "/readyz" {
			t.Errorf("%s: the readiness probe does not ask /readyz on port %s", program, want)
		}
		if l := c.LivenessProbe; l == nil || l.HTTPGet == nil || l.HTTPGet.Port.String() != "admin" {
			t.Errorf("%s: the liveness probe does not ask the admin listener", program)
		}
	}
}

// A key given twice is refused, as the API server's strict validation
// refuses it: the conversion to JSON must not merge it away first.
func TestStrictRefusesARepeatedKey(t *testing.T) {
	raw, err := os.ReadFile("testdata/duplicate-env.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := strict(raw, &appsv1.Deployment{}); err == nil || !strings.Contains(err.Error(), `"env"`) {
		t.Fatalf("a container with two env: keys: %v, want refused naming env", err)
	}
}

// The migrations run once per release: the Job is named by the version
// make image stamps, so an upgrade applies a new one (a Job's template
// cannot change, and one re-applied never runs again). It runs with its
// own account.
func TestManifestsMigrateByRelease(t *testing.T) {
	o := load(t)
	_, version := images(t)
	want := "migrate-" + strings.ReplaceAll(version, ".", "-")
	if len(o.jobs) != 1 || o.jobs[want] == nil {
		names := []string{}
		for name := range o.jobs {
			names = append(names, name)
		}
		t.Fatalf("Jobs %v, want one, %s", names, want)
	}
	if o.pods()["migrate"].Spec.Containers[0].Args[0] != "migrate" {
		t.Error("the migrate Job does not run seckillctl migrate")
	}
}

// secretsOf are the Secrets program's container reads as variables.
func (o objects) secretsOf(program string) []string {
	var names []string
	for _, from := range o.pods()[program].Spec.Containers[0].EnvFrom {
		if from.SecretRef != nil {
			names = append(names, from.SecretRef.Name)
		}
	}
	return names
}

// Each program reads a Secret of its own holding only what it reads: the
// api no binlog password, the order-writer no admin token; the
// migrations' account is not the programs'.
func TestManifestsGiveEachProgramOnlyItsCredentials(t *testing.T) {
	o, vars := load(t), config.Variables()
	readers := map[string]string{}
	for program := range o.pods() {
		reader := program
		if program == "migrate" {
			reader = "seckillctl"
		}
		for _, name := range o.secretsOf(program) {
			if other, ok := readers[name]; ok {
				t.Errorf("Secret %s is read by %s and %s: each program its own", name, other, program)
			}
			readers[name] = program
			s := o.secrets[name]
			if s == nil {
				t.Errorf("%s reads Secret %s, which the manifests lack", program, name)
				continue
			}
			for k := range s.StringData {
				if _, reads := vars[k].Defaults[reader]; !reads {
					t.Errorf("Secret %s gives %s %s, which it does not read", name, program, k)
				}
			}
		}
	}
	user := func(program string) string {
		for _, name := range o.secretsOf(program) {
			if dsn, ok := o.secrets[name].StringData["SECKILL_MYSQL_DSN"]; ok {
				return strings.SplitN(dsn, ":", 2)[0]
			}
		}
		return ""
	}
	for _, program := range []string{"api", "order-writer"} {
		if u := user(program); u == "" || u == user("migrate") {
			t.Errorf("%s's MySQL account %q: want one of its own beside the migrations' %q", program, u, user("migrate"))
		}
	}
}

// policed is what the NetworkPolicies let reach a program's pod and what
// they let it reach, each as "peer/protocol/port" (a port range as
// "from-to"), by the policies that select it; deny is whether one selects
// it for each direction at all. A peer is a namespace named by label
// alone ("data", "monitoring"), the cluster's DNS pods ("kube-dns"), or
// "*": an address block, a selector with expressions, no peer at all. A
// rule with no ports reads as port "*".
func (o objects) policed(t *testing.T, program string) (in, out []string, denyIn, denyOut bool) {
	t.Helper()
	tmpl := o.pods()[program]
	rules := func(peers []string, ports []networkingv1.NetworkPolicyPort) []string {
		var got []string
		for _, peer := range peers {
			if len(ports) == 0 {
				got = append(got, peer+"/*/*")
			}
			for _, p := range ports {
				proto := "TCP"
				if p.Protocol != nil {
					proto = string(*p.Protocol)
				}
				port := "*"
				if p.Port != nil {
					port = p.Port.String()
				}
				if p.EndPort != nil {
					port += fmt.Sprintf("-%d", *p.EndPort)
				}
				got = append(got, peer+"/"+proto+"/"+port)
			}
		}
		return got
	}
	peer := func(ns *metav1.LabelSelector, pods *metav1.LabelSelector, block *networkingv1.IPBlock) string {
		named := func(sel *metav1.LabelSelector, key string) string {
			if sel == nil || len(sel.MatchExpressions) > 0 || len(sel.MatchLabels) != 1 {
				return ""
			}
			return sel.MatchLabels[key]
		}
		name := named(ns, "kubernetes.io/metadata.name")
		switch {
		case block != nil || name == "":
			return "*"
		case pods == nil:
			return name
		case name == "kube-system" && named(pods, "k8s-app") == "kube-dns":
			return "kube-dns"
		}
		return "*"
	}
	for name, p := range o.policies {
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
		if err != nil {
			t.Fatalf("NetworkPolicy %s: %v", name, err)
		}
		if !sel.Matches(labels.Set(tmpl.Labels)) {
			continue
		}
		for _, ty := range p.Spec.PolicyTypes {
			denyIn = denyIn || ty == networkingv1.PolicyTypeIngress
			denyOut = denyOut || ty == networkingv1.PolicyTypeEgress
		}
		for _, r := range p.Spec.Ingress {
			peers := []string{}
			for _, f := range r.From {
				peers = append(peers, peer(f.NamespaceSelector, f.PodSelector, f.IPBlock))
			}
			if len(r.From) == 0 {
				peers = append(peers, "*")
			}
			in = append(in, rules(peers, r.Ports)...)
		}
		for _, r := range p.Spec.Egress {
			peers := []string{}
			for _, to := range r.To {
				peers = append(peers, peer(to.NamespaceSelector, to.PodSelector, to.IPBlock))
			}
			if len(r.To) == 0 {
				peers = append(peers, "*")
			}
			out = append(out, rules(peers, r.Ports)...)
		}
	}
	slices.Sort(in)
	slices.Sort(out)
	return slices.Compact(in), slices.Compact(out), denyIn, denyOut
}

// Nothing reaches a program or leaves it but what its job needs, each
// port to its own peer: the api's public port from the ingress namespace,
// the admin ports from the monitoring namespace, each program out to its
// stores in the data namespace and to the cluster's DNS only.
func TestManifestsNetworkPolicies(t *testing.T) {
	o := load(t)
	dns := []string{"kube-dns/TCP/53", "kube-dns/UDP/53"}
	stores := append([]string{"data/TCP/3306", "data/TCP/6379", "data/TCP/9092"}, dns...)
	want := map[string]struct{ in, out []string }{
		"api":               {[]string{"ingress-nginx/TCP/http", "monitoring/TCP/admin"}, stores},
		"order-writer":      {[]string{"monitoring/TCP/admin"}, stores},
		"cache-invalidator": {[]string{"monitoring/TCP/admin"}, stores},
		"migrate":           {[]string{"monitoring/TCP/admin"}, append([]string{"data/TCP/3306"}, dns...)},
	}
	for program := range o.pods() {
		w, ok := want[program]
		if !ok {
			t.Errorf("%s: no network rules expected of it in this test", program)
			continue
		}
		in, out, denyIn, denyOut := o.policed(t, program)
		if !denyIn || !denyOut {
			t.Errorf("%s: not selected by a policy for ingress (%v) and egress (%v): everything reaches it", program, denyIn, denyOut)
		}
		slices.Sort(w.in)
		slices.Sort(w.out)
		if !slices.Equal(in, w.in) {
			t.Errorf("%s: admits %v, want %v", program, in, w.in)
		}
		if !slices.Equal(out, w.out) {
			t.Errorf("%s: reaches %v, want %v", program, out, w.out)
		}
	}
	for _, c := range o.pods()["api"].Spec.Containers[0].Ports {
		if c.Name == "admin" && o.services["api"].Spec.Ports[0].TargetPort.String() == "admin" {
			t.Error("the api's Service sends to its admin port")
		}
	}
}

// The api believes forwarded addresses from the ingress controller only:
// the manifests ship no range to trust (a pod network would let any pod
// claim any buyer's address); the placeholder stops the api until set.
func TestManifestsTrustNoProxyUntilTold(t *testing.T) {
	o := load(t)
	v, ok := o.configMaps["seckill"].Data["SECKILL_API_TRUSTED_PROXIES"]
	if !ok {
		t.Fatal("no SECKILL_API_TRUSTED_PROXIES in the ConfigMap: the ingress's forwarded addresses would not be believed")
	}
	env := o.env(t, "api")
	env["SECKILL_API_TRUSTED_PROXIES"] = v
	_, err := config.LoadAPI(func(k string) (string, bool) { s, ok := env[k]; return s, ok })
	if err == nil || !strings.Contains(err.Error(), "SECKILL_API_TRUSTED_PROXIES") {
		t.Fatalf("the api with the shipped SECKILL_API_TRUSTED_PROXIES %q: %v, want refused naming the variable", v, err)
	}
}

// goMemLimit parses GOMEMLIMIT's form: bytes, or a number with B, KiB,
// MiB, GiB or TiB.
func goMemLimit(v string) (int64, error) {
	for i, unit := range []string{"TiB", "GiB", "MiB", "KiB", "B"} {
		if n, ok := strings.CutSuffix(v, unit); ok {
			x, err := strconv.ParseInt(n, 10, 64)
			return x << (10 * (4 - i)), err
		}
	}
	return strconv.ParseInt(v, 10, 64)
}

// Placement and runtime: the api's and the writers' pods spread over
// nodes and zones; every container's Go heap goal (GOMEMLIMIT) under its
// memory limit, with room for what the Go runtime does not count; no
// service-account token mounted.
func TestManifestsPlacementAndRuntime(t *testing.T) {
	o := load(t)
	for _, program := range []string{"api", "order-writer"} {
		keys := map[string]bool{}
		for _, c := range o.pods()[program].Spec.TopologySpreadConstraints {
			sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
			if err == nil && sel.Matches(labels.Set(o.pods()[program].Labels)) {
				keys[c.TopologyKey] = true
			}
		}
		if !keys["kubernetes.io/hostname"] || !keys["topology.kubernetes.io/zone"] {
			t.Errorf("%s: not spread over nodes and zones (%v)", program, keys)
		}
	}
	for program, p := range o.pods() {
		if a := p.Spec.AutomountServiceAccountToken; a == nil || *a {
			t.Errorf("%s: the service-account token is mounted", program)
		}
		c := p.Spec.Containers[0]
		limit := c.Resources.Limits.Memory()
		var goal string
		for _, e := range c.Env {
			if e.Name == "GOMEMLIMIT" {
				goal = e.Value
			}
		}
		if limit.IsZero() || goal == "" {
			t.Errorf("%s: a memory limit %v and GOMEMLIMIT %q: want both", program, limit, goal)
			continue
		}
		n, err := goMemLimit(goal)
		if err != nil || n <= 0 || n > limit.Value()*9/10 {
			t.Errorf("%s: GOMEMLIMIT %s (%d bytes, %v) not within 90%% of the limit %v", program, goal, n, err, limit)
		}
	}
}
