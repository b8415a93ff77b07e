package app_test

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/app"
	"github.com/seckill/seckill/internal/gate"
	"github.com/seckill/seckill/internal/testsupport"
)

// seckillctl check compares the vouchers on sale and says which Redis has
// lost; after a reconcile it finds nothing.
func TestCtlCheckThenReconcile(t *testing.T) {
	r, m, k := testsupport.MustRedis(t), testsupport.MustMySQL(t), testsupport.MustKafka(t)
	vars := map[string]string{"SECKILL_MYSQL_DSN": m.DSN, "SECKILL_KEY_PREFIX": r.Prefix,
		"SECKILL_KAFKA_BROKERS": strings.Join(k.Brokers, ","), "SECKILL_ORDERS_TOPIC": k.MustTopic(t, 1), "SECKILL_ORDER_GROUP": testsupport.Group(t)}
	maps.Copy(vars, r.Env())
	lookup := func(key string) (string, bool) { v, ok := vars[key]; return v, ok }
	m.MustSeedVoucher(t, 8, 5) // on sale in MySQL, never warmed
	m.MustSeedVoucher(t, 9, 5)
	if err := gate.NewStore(r.Client, r.Prefix).Warm(context.Background(), 9, 5, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}

	var out strings.Builder
	err := app.Ctl([]string{"check"}, lookup, &out)
	if err == nil || !strings.Contains(out.String(), "voucher 8: voucher_missing") || strings.Contains(out.String(), "voucher 9:") {
		t.Fatalf("check: %v\n%s\nwant voucher 8 missing and voucher 9 fine", err, out.String())
	}
	out.Reset()
	if err := app.Ctl([]string{"reconcile", "8"}, lookup, &out); err != nil {
		t.Fatalf("reconcile: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := app.Ctl([]string{"check"}, lookup, &out); err != nil || !strings.Contains(out.String(), "0 violations") {
		t.Fatalf("check after the reconcile: %v\n%s", err, out.String())
	}
	if err := app.Ctl([]string{"reconcile", "x"}, lookup, &out); err == nil {
		t.Fatal("reconcile of a malformed id went through")
	}
}
