package e2e

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/testsupport"
)

// One hot voucher sold from 3 stock buckets (on 3 masters in the cluster
// pass), through the api, Kafka and the order-writer: 3,000 buyers on
// 2,000 units, each trying again when told units are on their way. Exactly
// 2,000 orders in MySQL, nobody twice, every unit sold, and Redis and MySQL
// agree: no stock left in any bucket, no reservation pending.
func TestHotVoucherInBucketsThroughThePipeline(t *testing.T) {
	const buckets, stock, buyers = 3, 2000, 3000
	s := newSale(t)
	voucher := s.voucherIn(t, stock, buckets, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	var keys []string
	for b := range buckets {
		keys = append(keys, salestate.BucketKeys(s.redis.Prefix, voucher, buckets, b).Voucher)
	}
	if len(s.redis.Cluster) > 0 {
		if n := s.redis.MastersOf(t, keys...); n != buckets {
			t.Fatalf("the %d buckets are on %d masters", buckets, n)
		}
	}
	tokens := s.sessions(t, 1, buyers)
	var mu sync.Mutex
	var accepted []string
	msgs := map[string]int{}
	moving := 0
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, tok := range tokens {
		wg.Go(func() {
			<-start
			for {
				r := s.do(t, "POST", "/voucher-order/seckill/"+strconv.FormatInt(voucher, 10), tok, nil, "")
				id, _ := r.Data.(string)
				mu.Lock()
				if r.Status == 503 && id == "" {
					moving++
					mu.Unlock()
					time.Sleep(20 * time.Millisecond) // the buyer's pace of retrying a 503, not a wait for an event
					continue
				}
				if r.Status == 200 && r.Success {
					accepted = append(accepted, id)
				} else {
					msgs[fmt.Sprintf("%d %s", r.Status, r.ErrorMsg)]++
				}
				mu.Unlock()
				return
			}
		})
	}
	close(start)
	wg.Wait()
	t.Logf("%d accepted, %v, %d answers to try again", len(accepted), msgs, moving)
	if len(accepted) != stock || msgs["200 sold out"] != buyers-stock || len(msgs) != 1 {
		t.Fatalf("%d accepted, other answers %v; want %d and %d × sold out", len(accepted), msgs, stock, buyers-stock)
	}
	auditBuckets(t, s, voucher, buckets, accepted, stock)
}

// auditBuckets waits until MySQL holds want orders of voucher and checks
// them against what the gate accepted and what the buckets hold.
func auditBuckets(t *testing.T, s *sale, voucher int64, buckets int, accepted []string, want int) {
	t.Helper()
	ctx := context.Background()
	var orders, users, dbStock int
	testsupport.Wait(t, 60*time.Second, fmt.Sprintf("MySQL holds %d orders of voucher %d, no reservation pending", want, voucher), func() bool {
		if err := s.mysql.DB.QueryRow(`SELECT COUNT(*), COUNT(DISTINCT user_id), (SELECT stock FROM tb_seckill_voucher WHERE voucher_id = ?)
			FROM tb_voucher_order WHERE voucher_id = ?`, voucher, voucher).Scan(&orders, &users, &dbStock); err != nil {
			t.Fatal(err)
		}
		var pending int64
		for b := range buckets {
			pending += s.redis.Client.HLen(ctx, salestate.BucketKeys(s.redis.Prefix, voucher, buckets, b).Pending).Val()
		}
		return orders >= want && pending == 0
	})
	var redisStock int
	for b := range buckets {
		n, err := s.redis.Client.HGet(ctx, salestate.BucketKeys(s.redis.Prefix, voucher, buckets, b).Voucher, salestate.FieldStock).Int()
		if err != nil {
			t.Fatal(err)
		}
		redisStock += n
	}
	if orders != want || users != want || dbStock != 0 || redisStock != 0 {
		t.Fatalf("MySQL: %d orders by %d users, stock %d; Redis stock %d; want %d orders, nobody twice, no stock left", orders, users, dbStock, redisStock, want)
	}
	for _, id := range accepted {
		var n int
		if err := s.mysql.DB.QueryRow("SELECT COUNT(*) FROM tb_voucher_order WHERE id = ?", id).Scan(&n); err != nil || n != 1 {
			t.Fatalf("accepted order %s is not in MySQL (%v)", id, err)
		}
	}
}
