package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A draw sale at the routes: made and listed with its admission; in its
// window an attempt is a 202 entry, the same entry when sent again, and
// the buyer's order of the voucher reads "entered" until the draw (made
// by the order-writer's drawer, internal/draw and the e2e tests).
func TestADrawSaleTakesEntries(t *testing.T) {
	t.Parallel()
	a := startAPI(t, map[string]string{"SECKILL_ADMIN_TOKEN": testAdminToken, "SECKILL_RATE_SECKILL_USER": "off", "SECKILL_RATE_LOOKUP_USER": "off"})
	now := time.Now()
	body := fmt.Sprintf(`{"shopId":7,"title":"draw","payValue":100,"actualValue":1000,"stock":3,"beginTime":%q,"endTime":%q,
		"admission":{"mode":"draw","windowSeconds":600}}`, now.Add(-time.Minute).UTC().Format(time.RFC3339), now.Add(time.Hour).UTC().Format(time.RFC3339))
	res := call(t, "POST", a.URL+"/voucher/seckill", map[string]string{"X-Admin-Token": testAdminToken}, body)
	if res.Status != 200 || !res.Body.Success {
		t.Fatalf("create a draw sale: %s", res.Raw)
	}
	id := string(res.Body.Data)
	if list := call(t, "GET", a.URL+"/voucher/list/7", nil, nil); !strings.Contains(string(list.Body.Data), `"admission":{"mode":"draw","windowSeconds":600}`) {
		t.Fatalf("the list does not show the admission: %s", list.Raw)
	}

	auth := map[string]string{"authorization": a.loggedIn(t, randomPhone())}
	type entry struct {
		Entered bool      `json:"entered"`
		OrderID string    `json:"orderId"`
		DrawAt  time.Time `json:"drawAt"`
		Outcome string    `json:"outcome"`
	}
	enter := func() entry {
		res := call(t, "POST", a.URL+"/voucher-order/seckill/"+id, auth, nil)
		var e entry
		if res.Status != 202 || !res.Body.Success || json.Unmarshal(res.Body.Data, &e) != nil || !e.Entered || e.OrderID == "" {
			t.Fatalf("an attempt in the window: %d %s, want 202 entered", res.Status, res.Raw)
		}
		return e
	}
	first := enter()
	if again := enter(); again != first {
		t.Fatalf("entering again: %+v, want the first entry %+v", again, first)
	}
	if d := first.DrawAt.Sub(now.Add(-time.Minute).Truncate(time.Second).Add(10 * time.Minute)); d < -time.Second || d > time.Second {
		t.Fatalf("draw at %v, want the window's end", first.DrawAt)
	}
	if first.Outcome != "/voucher-order/of/voucher/"+id {
		t.Fatalf("outcome at %q", first.Outcome)
	}
	res = call(t, "GET", a.URL+first.Outcome, auth, nil)
	var st struct {
		ID, Status string
		DrawAt     time.Time
	}
	if res.Status != 200 || json.Unmarshal(res.Body.Data, &st) != nil || st.ID != first.OrderID || st.Status != "entered" || !st.DrawAt.Equal(first.DrawAt) {
		t.Fatalf("the entry's outcome before the draw: %s", res.Raw)
	}
	// Its window stays where the entrants were told the draw is.
	admin := map[string]string{"X-Admin-Token": testAdminToken}
	for body, says := range map[string]string{
		fmt.Sprintf(`{"beginTime":%q}`, now.Add(time.Minute).UTC().Format(time.RFC3339)): "keeps its beginTime",
		fmt.Sprintf(`{"endTime":%q}`, now.Add(5*time.Minute).UTC().Format(time.RFC3339)): "ends after its draw",
	} {
		if res := call(t, "PUT", a.URL+"/voucher/seckill/"+id, admin, body); res.Status != 409 || !strings.Contains(res.Body.ErrorMsg, says) {
			t.Errorf("a draw sale changed with %s: %d %s, want 409 saying %q", body, res.Status, res.Raw, says)
		}
	}
	if res := call(t, "PUT", a.URL+"/voucher/seckill/"+id, admin, `{"addStock":2}`); res.Status != 200 {
		t.Errorf("units added to a draw sale: %d %s", res.Status, res.Raw)
	}
	// Another buyer of the voucher, who did not enter, has no order.
	if res := call(t, "GET", a.URL+first.Outcome, map[string]string{"authorization": a.loggedIn(t, randomPhone())}, nil); res.Status != 404 {
		t.Fatalf("a buyer who did not enter: %s", res.Raw)
	}
}

func TestADrawSalesBadAdmissionIsRefused(t *testing.T) {
	t.Parallel()
	a := startAPI(t, map[string]string{"SECKILL_ADMIN_TOKEN": testAdminToken})
	admin := map[string]string{"X-Admin-Token": testAdminToken}
	const sale = `"shopId":1,"title":"x","payValue":1,"actualValue":1,"stock":5,"beginTime":"2026-01-01T00:00:00Z","endTime":"2026-01-01T01:00:00Z"`
	for _, tt := range []struct {
		body string
		want int
		says string
	}{
		{`{` + sale + `,"admission":{"mode":"lottery"}}`, 400, "admission.mode must be first-come or draw"},
		{`{` + sale + `,"admission":{}}`, 400, "admission.mode is required"},
		{`{` + sale + `,"admission":{"mode":"draw"}}`, 400, "windowSeconds must be from 1 to 600"},
		{`{` + sale + `,"admission":{"mode":"draw","windowSeconds":0}}`, 400, "windowSeconds must be from 1 to 600"},
		{`{` + sale + `,"admission":{"mode":"draw","windowSeconds":601}}`, 400, "windowSeconds must be from 1 to 600"},
		{`{` + sale + `,"admission":{"mode":"draw","windowSeconds":-5}}`, 400, "windowSeconds must be from 1 to 600"},
		{`{` + sale + `,"admission":{"mode":"draw","windowSeconds":5},"stockBuckets":2}`, 400, "one stock bucket"},
		{`{` + sale + `,"admission":{"mode":"first-come","windowSeconds":5}}`, 400, "a first-come sale has none"},
		{`{` + sale + `,"admission":"draw"}`, 400, "admission"},
		{`{` + sale + `,"admission":{"mode":"draw","windowSeconds":"5"}}`, 400, "windowSeconds"},
		{`{"shopId":1,"title":"x","payValue":1,"actualValue":1,"stock":5,"beginTime":"2026-01-01T00:00:00Z","endTime":"2026-01-01T00:00:05Z","admission":{"mode":"draw","windowSeconds":5}}`,
			422, "a draw's window must end before endTime"},
	} {
		res := call(t, "POST", a.URL+"/voucher/seckill", admin, tt.body)
		if res.Status != tt.want || res.Body.Success || !strings.Contains(res.Body.ErrorMsg, tt.says) {
			t.Errorf("%s: %d %s, want %d saying %q", tt.body, res.Status, res.Raw, tt.want, tt.says)
		}
	}
	// An ordinary voucher has no admission.
	res := call(t, "POST", a.URL+"/voucher", admin, `{"shopId":1,"title":"x","payValue":1,"actualValue":1,"admission":{"mode":"draw","windowSeconds":5}}`)
	if res.Status != 400 || !strings.Contains(res.Body.ErrorMsg, "admission is a flash sale's") {
		t.Errorf("an ordinary voucher with an admission: %d %s", res.Status, res.Raw)
	}
}
