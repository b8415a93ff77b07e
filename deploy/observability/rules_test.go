package observability_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// promtool checks the rules and runs their unit tests. It comes with
// Debian's prometheus package (deploy/local/stack.sh install): missing, the
// test fails rather than skips.
func TestPromtool(t *testing.T) {
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Fatal("promtool is not installed: deploy/local/stack.sh install (Debian's prometheus package)")
	}
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		out, err := exec.Command("promtool", args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

type ruleFile struct {
	Groups []struct {
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

type ruleTests struct {
	Tests []struct {
		AlertRuleTest []struct {
			AlertName string           `yaml:"alertname"`
			ExpAlerts []map[string]any `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func load(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// Every alert has a unit test in which it fires (a rule that never fires
// in a test could be broken unnoticed) and a runbook section in
// docs/operations.md that its runbook annotation points at.
func TestEveryAlertFiresInATestAndHasARunbook(t *testing.T) {
	var rules ruleFile
	var tests ruleTests
	load(t, "alerts.yml", &rules)
	load(t, "alerts_test.yml", &tests)
	fires := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, at := range tc.AlertRuleTest {
			if len(at.ExpAlerts) > 0 {
				fires[at.AlertName] = true
			}
		}
	}
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^### (\S+)$`).FindAllStringSubmatch(string(doc), -1) {
		sections[strings.ToLower(m[1])] = true
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			if !fires[r.Alert] {
				t.Errorf("%s never fires in alerts_test.yml", r.Alert)
			}
			anchor, ok := strings.CutPrefix(r.Annotations["runbook"], "docs/operations.md#")
			if !ok || !sections[anchor] || anchor != strings.ToLower(r.Alert) {
				t.Errorf("%s: runbook %q, want docs/operations.md#%s with a section \"### %s\"", r.Alert, r.Annotations["runbook"], strings.ToLower(r.Alert), r.Alert)
			}
		}
	}
	if n < 19 {
		t.Fatalf("%d alerts read from alerts.yml, want the 19 it has", n)
	}
}
