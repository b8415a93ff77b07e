package e2e

import (
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testsupport"
)

// families are the metric families a program's /metrics exposes, with the
// value of each unlabelled or labelled series as written.
func families(t *testing.T, admin string) (names map[string]bool, series map[string]float64) {
	t.Helper()
	names, series = map[string]bool{}, map[string]float64{}
	for _, line := range strings.Split(testsupport.Eventually(t, admin+"/metrics", 200, 10*time.Second), "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			names[strings.Fields(rest)[0]] = true
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 && !strings.HasPrefix(line, "#") {
			v, _ := strconv.ParseFloat(line[i+1:], 64)
			series[line[:i]] = v
		}
	}
	return names, series
}

// galeraOnly are the families a program exports only on a Galera cluster
// (the sale here runs on one MariaDB), with the test that sees each
// exported there.
var galeraOnly = map[string]string{"seckill_mysql_cluster_size": "TestChaosProgramsOnTheMySQLCluster"}

// The operator's view of a sale, from the three programs running: the sale
// answers counted by outcome and the stock left match what the buyers got;
// and every metric the dashboard and the alert rules name is exported by a
// running program (a panel or an alert on a metric nobody exports would
// stay empty, or silent, for ever).
func TestOperatorMetrics(t *testing.T) {
	t.Parallel()
	s := newSale(t)
	voucher := s.voucher(t, 20, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	accepted, _, msgs := s.buy(t, voucher, s.sessions(t, 1, 50))
	if len(accepted) != 20 || msgs["200 sold out"] != 30 {
		t.Fatalf("%d accepted, other answers %v; want 20 and 30 × sold out", len(accepted), msgs)
	}
	s.audit(t, voucher, accepted, 20, 0)

	env := s.env()
	invalidatorAdmin := testsupport.FreeAddr(t)
	env["SECKILL_ADMIN_ADDR"] = invalidatorAdmin
	env["SECKILL_INVALIDATE_RETRY_TOPIC"], env["SECKILL_INVALIDATE_DLQ_TOPIC"] = s.kafka.MustTopic(t, 1), s.kafka.MustTopic(t, 1)
	env["SECKILL_INVALIDATE_GROUP"] = testsupport.Group(t)
	testsupport.Start(t, testsupport.MustBuild(t, "../../cmd/cache-invalidator"), env)
	testsupport.Eventually(t, "http://"+invalidatorAdmin+"/readyz", 200, 30*time.Second)

	apiNames, apiSeries := families(t, s.apiAdmin)
	v := strconv.FormatInt(voucher, 10)
	for name, want := range map[string]float64{
		`seckill_sale_answers_total{outcome="accepted"}`: 20,
		`seckill_sale_answers_total{outcome="sold_out"}`: 30,
		`seckill_sale_stock{voucher="` + v + `"}`:        0,
	} {
		if got, ok := apiSeries[name]; !ok || got != want {
			t.Errorf("%s = %v (exported: %v), want %v", name, got, ok, want)
		}
	}
	exported := apiNames
	for _, admin := range []string{"http://" + s.writerEnv["SECKILL_ADMIN_ADDR"], "http://" + invalidatorAdmin} {
		names, _ := families(t, admin)
		for n := range names {
			exported[n] = true
		}
	}
	named := regexp.MustCompile(`\b(seckill_[a-z_]+|process_[a-z_]+)\b`)
	for _, file := range []string{"../../deploy/observability/dashboard.json", "../../deploy/observability/alerts.yml"} {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(file, ".json") {
			var dashboard struct {
				Panels []struct{ Targets []struct{ Expr string } }
			}
			if err := json.Unmarshal(raw, &dashboard); err != nil || len(dashboard.Panels) == 0 {
				t.Fatalf("%s: %v, %d panels", file, err, len(dashboard.Panels))
			}
		}
		seen := map[string]bool{}
		for _, m := range named.FindAllString(string(raw), -1) {
			family := m
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(m, suffix); ok && exported[base] {
					family = base
				}
			}
			if seen[family] {
				continue
			}
			seen[family] = true
			if test, ok := galeraOnly[family]; ok && !exported[family] {
				t.Logf("%s: exported on a Galera cluster only, which %s checks", family, test)
				continue
			}
			if !exported[family] {
				t.Errorf("%s names %s, which no running program exports", file, family)
			}
		}
		t.Logf("%s: %d metric families, each exported", file, len(seen))
	}
}
