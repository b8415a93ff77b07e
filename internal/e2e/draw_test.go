package e2e

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/draw"
	"github.com/seckill/seckill/internal/orderdb"
)

// drawSale is a flash sale with a draw over its first window, opening at
// begin.
func (s *sale) drawSale(t *testing.T, stock int, window time.Duration, begin time.Time) int64 {
	t.Helper()
	body := fmt.Sprintf(`{"shopId":1,"title":"e2e draw","payValue":100,"actualValue":1000,"stock":%d,"beginTime":%q,"endTime":%q,
		"admission":{"mode":"draw","windowSeconds":%d}}`,
		stock, begin.UTC().Format(time.RFC3339), begin.Add(time.Hour).UTC().Format(time.RFC3339), int(window/time.Second))
	r := s.do(t, "POST", "/voucher/seckill", "", map[string]string{"X-Admin-Token": adminToken}, body)
	id, ok := r.Data.(float64)
	if r.Status != 200 || !r.Success || !ok {
		t.Fatalf("create a draw sale: %+v", r)
	}
	return int64(id)
}

// arrival is one buyer's attempt at its time after the opening.
type arrival struct {
	user   int64 // index into the tokens
	after  time.Duration
	script bool
	answer result
}

// crowdAt is a crowd at an opening: scripts buyers arriving in its first
// 10 ms, people spread over spread after them.
func crowdAt(scripts, people int, spread time.Duration) []*arrival {
	var as []*arrival
	for i := range scripts {
		as = append(as, &arrival{user: int64(i), after: time.Duration(rand.Int64N(int64(10 * time.Millisecond))), script: true})
	}
	for i := range people {
		as = append(as, &arrival{user: int64(scripts + i), after: 10*time.Millisecond + time.Duration(rand.Int64N(int64(spread-10*time.Millisecond)))})
	}
	return as
}

// send makes every arrival's attempt at its time after open. The sleeps
// are the schedule: the test is about who arrives when.
func (s *sale) send(t *testing.T, voucher int64, tokens []string, open time.Time, as []*arrival) {
	var wg sync.WaitGroup
	for _, a := range as {
		wg.Go(func() {
			time.Sleep(time.Until(open.Add(a.after))) // the schedule: the test is about who arrives when
			a.answer = s.do(t, "POST", "/voucher-order/seckill/"+strconv.FormatInt(voucher, 10), tokens[a.user], nil, "")
		})
	}
	wg.Wait()
}

// hypergeometricBound is the largest number of scripts among winners drawn
// from entrants that a fair draw exceeds with a probability under 1e-4:
// its mean plus 4 standard deviations.
func hypergeometricBound(winners, entrants, scripts int) int {
	p := float64(scripts) / float64(entrants)
	sd := math.Sqrt(float64(winners) * p * (1 - p) * float64(entrants-winners) / float64(entrants-1))
	return int(math.Ceil(float64(winners)*p + 4*sd))
}

// The same crowd on two sales of 100 units opening together: 200 scripts
// in the first 10 ms and 1,800 people over the next 4.5 s. First-come, the
// scripts take nearly every unit; with a draw, their share of the winners
// is their share of the entrants (10 %) within a fair draw's bound. The
// draw's order, recomputed from what MySQL keeps of it, is the orders
// MySQL holds, and every entrant reads its outcome.
func TestADrawGivesScriptsTheirShareNotTheStock(t *testing.T) {
	t.Parallel()
	s := newSale(t)
	const stock, scripts, people = 100, 200, 1800
	tokens := s.sessions(t, 1, scripts+people)
	isScript := func(user int64) bool { return user <= scripts } // user ids from 1

	open := time.Now().Truncate(time.Second).Add(3 * time.Second)
	firstCome := s.voucher(t, stock, open, open.Add(time.Hour))
	drawn := s.drawSale(t, stock, 6*time.Second, open)
	// The people arrive within the draw's window with 1.5 s to spare (the
	// two crowds at once, beside other tests, on two cores): an attempt
	// after it would be no entry.
	const spread = 4500 * time.Millisecond
	fcCrowd, drawCrowd := crowdAt(scripts, people, spread), crowdAt(scripts, people, spread)
	// A script enters again a second later: the same entry.
	drawCrowd = append(drawCrowd, &arrival{user: 0, after: time.Second, script: true})
	var both sync.WaitGroup
	both.Go(func() { s.send(t, firstCome, tokens, open, fcCrowd) })
	both.Go(func() { s.send(t, drawn, tokens, open, drawCrowd) })
	both.Wait()

	var fcAccepted []string
	fcScripts := 0
	for _, a := range fcCrowd {
		if a.answer.Status == 200 && a.answer.Success {
			fcAccepted = append(fcAccepted, a.answer.Data.(string))
			if a.script {
				fcScripts++
			}
		}
	}
	s.audit(t, firstCome, fcAccepted, stock, 0)

	entries := map[int64]string{}
	for _, a := range drawCrowd {
		data, _ := a.answer.Data.(map[string]any)
		if a.answer.Status != 202 || !a.answer.Success || data["entered"] != true {
			t.Fatalf("user %d at +%v in the window: %+v, want 202 entered", a.user+1, a.after, a.answer)
		}
		id := data["orderId"].(string)
		if was, ok := entries[a.user+1]; ok && was != id {
			t.Fatalf("user %d entered again: entry %s, then %s", a.user+1, was, id)
		}
		entries[a.user+1] = id
	}

	won := s.drawnAsSeeded(t, drawn, entries, stock)
	drawScripts := 0
	for user := range won {
		if isScript(user) {
			drawScripts++
		}
	}
	bound := hypergeometricBound(stock, scripts+people, scripts)
	t.Logf("scripts' share of the %d winners: first-come %d (%.0f %%), draw %d (%.0f %%; a fair draw: 10 %%, at most %d here)",
		stock, fcScripts, 100*float64(fcScripts)/stock, drawScripts, 100*float64(drawScripts)/stock, bound)
	if drawScripts > bound {
		t.Errorf("the draw gave the scripts %d of %d units, above a fair draw's bound of %d", drawScripts, stock, bound)
	}
	if fcScripts <= bound {
		t.Errorf("first-come gave the scripts only %d of %d: the crowd does not show what the draw is for", fcScripts, stock)
	}

	// Every entrant reads its outcome: its order, or sold out.
	for user := int64(1); user <= scripts+people; user++ {
		r := s.do(t, "GET", "/voucher-order/of/voucher/"+strconv.FormatInt(drawn, 10), tokens[user-1], nil, "")
		st, _ := r.Data.(map[string]any)
		if id, ok := won[user]; ok {
			if r.Status != 200 || st["id"] != id || st["status"] == "failed" {
				t.Fatalf("winner %d reads %+v", user, r)
			}
			continue
		}
		if r.Status != 200 || st["status"] != "failed" || st["reason"] != "sold_out" || st["id"] != entries[user] {
			t.Fatalf("entrant %d, not drawn, reads %+v", user, r)
		}
	}
	// After the draw, a newcomer buys first-come from what is left: none.
	late := s.sessions(t, 100_000, 1)
	if r := s.do(t, "POST", "/voucher-order/seckill/"+strconv.FormatInt(drawn, 10), late[0], nil, ""); r.Status != 200 || r.Success || r.ErrorMsg != "sold out" {
		t.Fatalf("a newcomer after the draw: %+v, want sold out", r)
	}
}

// drawnAsSeeded waits for voucher's draw to be made and its orders
// written, and checks them against the draw recomputed from what MySQL
// keeps of it, its seed and entrants, which must be the entries the
// buyers were told of (user -> order id): the first stock entrants in
// the seed's order hold their entries' orders, no one else holds one, no
// reservation is pending, and the stock is exact in MySQL and Redis. It returns the winners (user -> order id).
func (s *sale) drawnAsSeeded(t *testing.T, voucher int64, entries map[int64]string, stock int) map[int64]string {
	t.Helper()
	winners := min(stock, len(entries))
	s.audit(t, voucher, nil, winners, stock-winners)
	var seed string
	if err := s.mysql.DB.QueryRow("SELECT draw_seed FROM tb_seckill_voucher WHERE voucher_id = ?", voucher).Scan(&seed); err != nil {
		t.Fatal(err)
	}
	entrants, kept, err := orderdb.DrawRecords{DB: s.mysql.DB}.Entrants(context.Background(), voucher)
	if err != nil || !kept {
		t.Fatalf("the draw's entrants of record: %v (kept %v)", err, kept)
	}
	if len(entrants) != len(entries) {
		t.Fatalf("%d entrants of record, %d buyers told they entered", len(entrants), len(entries))
	}
	for _, e := range entrants {
		if entries[e.UserID] != strconv.FormatInt(e.OrderID, 10) {
			t.Fatalf("entrant of record %d under order %d; the buyer was told %q", e.UserID, e.OrderID, entries[e.UserID])
		}
	}
	ordered, err := draw.Order(seed, entrants)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{}
	for _, e := range ordered[:winners] {
		want[e.UserID] = strconv.FormatInt(e.OrderID, 10)
	}
	rows, err := s.mysql.DB.Query("SELECT id, user_id FROM tb_voucher_order WHERE voucher_id = ?", voucher)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	won := map[int64]string{}
	for rows.Next() {
		var id string
		var user int64
		if err := rows.Scan(&id, &user); err != nil {
			t.Fatal(err)
		}
		if want[user] != id {
			t.Fatalf("order %s of user %d: the draw recomputed from its seed gives that user %q", id, user, want[user])
		}
		won[user] = id
	}
	if len(won) != winners {
		t.Fatalf("%d orders, want %d", len(won), winners)
	}
	return won
}
