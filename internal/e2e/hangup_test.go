package e2e

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/testsupport"
)

// Clients that give up 1 to 200 ms after sending (spread, so that some
// leave while the gate runs, some while the publish waits for its acks,
// and, on a slow machine, not all before the request reaches the gate):
// once the gate has taken a unit,
// the order is published on the API's own deadline, not the client's, so
// it reaches MySQL at once rather than a relay interval later, and no
// request ends as a server fault.
func TestClientsThatHangUpLoseNoOrder(t *testing.T) {
	s := newSale(t)
	const n = 500
	voucher := s.voucher(t, n, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	path := s.api + "/voucher-order/seckill/" + strconv.FormatInt(voucher, 10)
	tokens := s.sessions(t, 1, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	left := map[int64]bool{} // the users whose client hung up before its answer
	start := make(chan struct{})
	for i, tok := range tokens {
		wg.Go(func() {
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+i%200)*time.Millisecond)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, path, nil)
			req.Header.Set("authorization", tok)
			res, err := s.client.Do(req)
			if err == nil {
				_, err = io.Copy(io.Discard, res.Body)
				_ = res.Body.Close()
			}
			if err != nil {
				mu.Lock()
				left[int64(1+i)] = true
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	end := time.Now()

	// Accepted orders are the units the gate took; the API may still be
	// finishing requests whose clients left, so both sides are read again
	// until they agree.
	ctx := context.Background()
	stockKey := salestate.KeysFor(s.redis.Prefix, voucher).Voucher
	pendingKey := salestate.KeysFor(s.redis.Prefix, voucher).Pending
	var accepted, orders, pending int64
	testsupport.Poll(time.Until(end.Add(time.Second)), func() bool {
		stock, err := s.redis.Client.HGet(ctx, stockKey, "stock").Int64()
		if err != nil {
			t.Fatal(err)
		}
		accepted = n - stock
		if err := s.mysql.DB.QueryRow("SELECT COUNT(*) FROM tb_voucher_order WHERE voucher_id = ?", voucher).Scan(&orders); err != nil {
			t.Fatal(err)
		}
		pending = s.redis.Client.HLen(ctx, pendingKey).Val()
		return orders == accepted && pending == 0
	})
	if orders != accepted || pending != 0 {
		t.Fatalf("1 s after the sale: %d orders in MySQL and %d pending of %d accepted; want every accepted order in MySQL", orders, pending, accepted)
	}
	rows, err := s.mysql.DB.Query("SELECT user_id FROM tb_voucher_order WHERE voucher_id = ?", voucher)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var leftButOrdered int
	for rows.Next() {
		var user int64
		if err := rows.Scan(&user); err != nil {
			t.Fatal(err)
		}
		if left[user] {
			leftButOrdered++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d of %d clients hung up before their answer; %d of them have their order in MySQL; %d accepted in all, %d pending, %v after the last client left",
		len(left), n, leftButOrdered, accepted, pending, time.Since(end).Round(time.Millisecond))
	if leftButOrdered == 0 {
		t.Fatal("no client hung up after the gate took its unit: the test proves nothing")
	}
	metrics := testsupport.Eventually(t, s.apiAdmin+"/metrics", 200, 5*time.Second)
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "seckill_http_requests_total{") && strings.Contains(line, `status="500"`) {
			t.Fatalf("a hung-up request ended as a server error: %s", line)
		}
	}
}
