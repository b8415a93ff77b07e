package config_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/config"
)

var variable = regexp.MustCompile(`SECKILL_[A-Z0-9_]*[A-Z0-9](_\*)?`)

// Every SECKILL_ variable the README and docs/ name is one the programs
// read (their configuration asks for it, in either session mode), or the
// Makefile, the scripts or the compose file use: a renamed variable cannot
// live on in the docs (docs/redis-cluster.md named SECKILL_SESSION_CACHE,
// which is SECKILL_SESSION_CACHE_TTL).
func TestDocsNameOnlyRealVariables(t *testing.T) {
	root := "../.."
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
		_, _ = config.LoadCtl(asked)
	}
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == ".stack" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		name := d.Name()
		if d.IsDir() || strings.HasSuffix(name, "_test.go") ||
			!(strings.HasSuffix(name, ".go") || strings.HasSuffix(name, ".sh") || name == "Makefile" || strings.HasSuffix(name, ".yml")) {
			return nil
		}
		for _, v := range variable.FindAllString(read(path), -1) {
			known[v] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, doc := range append(docs, filepath.Join(root, "README.md")) {
		for _, v := range variable.FindAllString(read(doc), -1) {
			if !realVariable(known, v) && !strings.HasPrefix(v, "SECKILL_TEST_") {
				t.Errorf("%s names %s, which nothing reads", filepath.Base(doc), v)
			}
		}
	}
}

// realVariable: v is known, or, written PREFIX_*, some known variable has
// that prefix.
func realVariable(known map[string]bool, v string) bool {
	prefix, wild := strings.CutSuffix(v, "*")
	if !wild {
		return known[v]
	}
	for k := range known {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// docs/configuration.md's table is what the code reads: every variable,
// the programs that read it and their defaults, generated from the
// loaders themselves (seckillctl config --markdown). A default changed in
// the code, a variable added or renamed, and the page differs.
func TestConfigurationPageIsTheCodes(t *testing.T) {
	raw, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	page := string(raw)
	const begin, end = "TestConfigurationPageIsTheCodes fails while they differ. -->\n\n", "\n<!-- end of the generated table -->"
	i, j := strings.Index(page, begin), strings.Index(page, end)
	if i < 0 || j < i {
		t.Fatal("docs/configuration.md lost the markers around its generated table")
	}
	onPage := page[i+len(begin) : j]
	want, err := config.Markdown()
	if err != nil {
		t.Fatal(err)
	}
	if onPage == want {
		return
	}
	got, wanted := strings.Split(onPage, "\n"), strings.Split(want, "\n")
	for k := range max(len(got), len(wanted)) {
		g, w := "", ""
		if k < len(got) {
			g = got[k]
		}
		if k < len(wanted) {
			w = wanted[k]
		}
		if g != w {
			t.Fatalf("docs/configuration.md differs from the code at the table's line %d:\n page: %s\n code: %s\n"+
				"regenerate it: make config-docs (seckillctl config --markdown, between the markers)", k+1, g, w)
		}
	}
}

// The defaults the table shows are the ones the programs start with.
func TestVariablesKnowEachProgramsDefault(t *testing.T) {
	vars := config.Variables()
	for _, tc := range []struct{ name, program, want string }{
		{"SECKILL_ADMIN_ADDR", "api", "127.0.0.1:9100"},
		{"SECKILL_ADMIN_ADDR", "order-writer", "127.0.0.1:9101"},
		{"SECKILL_ADMIN_ADDR", "cache-invalidator", "127.0.0.1:9102"},
		{"SECKILL_SHUTDOWN_TIMEOUT", "api", "15s"},
		{"SECKILL_JWT_REFRESH_TTL", "api", "168h"},
		{"SECKILL_ORDER_BATCH_SIZE", "order-writer", "2000"},
		{"SECKILL_RATE_SECKILL_SCOPE", "api", "local"},
		{"SECKILL_REDIS_CLUSTER", "api", ""},
	} {
		if got, ok := vars[tc.name].Defaults[tc.program]; !ok || got != tc.want {
			t.Errorf("%s in %s: %q (read: %v), want %q", tc.name, tc.program, got, ok, tc.want)
		}
	}
	cfg, err := config.LoadAPI(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if got := vars["SECKILL_SESSION_TTL"].Defaults["api"]; got != cfg.HTTP.SessionTTL.String() && got+"0s" != cfg.HTTP.SessionTTL.String() {
		t.Errorf("SECKILL_SESSION_TTL's recorded default %q, the loaded one %v", got, cfg.HTTP.SessionTTL)
	}
}

// deploy/topics is the one list of the Kafka topics the stack and the
// compose file create: its names are the programs' default topics, every
// one of them, and neither the stack nor the compose file writes a topic
// out again.
func TestTopicsFileNamesTheProgramsTopics(t *testing.T) {
	f, err := os.Open("../../deploy/topics")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Read as seckillctl topics reads it.
	list, err := broker.ParseTopicList(f)
	if err != nil {
		t.Fatalf("deploy/topics: %v", err)
	}
	inFile := map[string]bool{}
	first := list[0].Name
	for _, topic := range list {
		inFile[topic.Name] = true
	}
	vars := config.Variables()
	topics := map[string]bool{}
	for _, v := range []string{"SECKILL_ORDERS_TOPIC", "SECKILL_ORDERS_DLQ_TOPIC", "SECKILL_INVALIDATE_RETRY_TOPIC", "SECKILL_INVALIDATE_DLQ_TOPIC"} {
		for _, def := range vars[v].Defaults {
			topics[def] = true
		}
	}
	if want := vars["SECKILL_ORDERS_TOPIC"].Defaults["api"]; first != want {
		t.Errorf("deploy/topics starts with %s; the orders topic, %s, comes first (stack.sh sets its partitions apart)", first, want)
	}
	for name := range topics {
		if !inFile[name] {
			t.Errorf("the programs' topic %s is not in deploy/topics", name)
		}
	}
	for name := range inFile {
		if !topics[name] {
			t.Errorf("deploy/topics has %s, which no program uses by default", name)
		}
	}
	for _, f := range []string{"../../deploy/local/stack.sh", "../../deploy/local/stack-redis.sh", "../../deploy/local/stack-mariadb.sh", "../../deploy/local/stack-kafka.sh", "../../deploy/docker-compose.yml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for name := range topics {
			if regexp.MustCompile(`(^|[^\w.])` + regexp.QuoteMeta(name) + `([^\w.]|$)`).Match(b) {
				t.Errorf("%s writes the topic %s out again: read deploy/topics", filepath.Base(f), name)
			}
		}
	}
}

// deploy/local/ports is the one place of the stack's default ports: the
// programs' default addresses point at them, and neither stack.sh nor the
// Makefile writes one out again.
func TestDefaultAddressesAreTheStacksPorts(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/local/ports")
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.HasPrefix(k, "#") {
			ports[strings.TrimSuffix(k, "_DEFAULT")] = v
		}
	}
	vars := config.Variables()
	for _, tc := range []struct{ variable, want string }{
		{"SECKILL_REDIS_ADDR", "127.0.0.1:" + ports["REDIS_PORT"]},
		{"SECKILL_MYSQL_DSN", "seckill:seckill@tcp(127.0.0.1:" + ports["MYSQL_PORT"] + ")/seckill"},
		{"SECKILL_BINLOG_ADDR", "127.0.0.1:" + ports["MYSQL_PORT"]},
		{"SECKILL_KAFKA_BROKERS", "127.0.0.1:" + ports["KAFKA_PORT"]},
	} {
		if len(vars[tc.variable].Defaults) == 0 {
			t.Errorf("no program reads %s", tc.variable)
		}
		for program, got := range vars[tc.variable].Defaults {
			if got != tc.want {
				t.Errorf("%s's default in %s is %s; deploy/local/ports makes it %s", tc.variable, program, got, tc.want)
			}
		}
	}
	for _, f := range []string{"../../deploy/local/stack.sh", "../../deploy/local/stack-redis.sh", "../../deploy/local/stack-mariadb.sh", "../../deploy/local/stack-kafka.sh", "../../Makefile"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for name, port := range ports {
			if regexp.MustCompile(`\b` + port + `\b`).Match(b) {
				t.Errorf("%s writes %s's port %s out again: read deploy/local/ports", filepath.Base(f), name, port)
			}
		}
	}
}
