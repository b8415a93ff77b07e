//go:build chaos

package e2e

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/salestate"
	"github.com/seckill/seckill/internal/testsupport"
)

// enterAll has every token enter voucher's draw at once: the entries by
// user id (from first).
func (s *sale) enterAll(t *testing.T, voucher int64, tokens []string, first int64) map[int64]string {
	t.Helper()
	var crowd []*arrival
	for i := range tokens {
		crowd = append(crowd, &arrival{user: int64(i)})
	}
	s.send(t, voucher, tokens, time.Now(), crowd)
	entries := map[int64]string{}
	for _, a := range crowd {
		data, _ := a.answer.Data.(map[string]any)
		id, _ := data["orderId"].(string)
		if a.answer.Status != 202 || id == "" {
			t.Fatalf("entering: %+v, want 202 entered", a.answer)
		}
		entries[first+a.user] = id
	}
	return entries
}

var leaseTaken = regexp.MustCompile(`msg="draw lease taken[^"]*".*? fence=(\d+)`)

// The order-writer that makes a draw is killed half way through it (its
// drawer's lease held, some winners served, the draw not recorded): the
// other order-writer takes the lease over and makes the same draw, so
// every winner is served once, the others read sold out, the stock exact.
func TestChaosDrawerKilledMidDraw(t *testing.T) {
	s := newSaleOn(t, stack{testsupport.MustRedis(t), testsupport.MustMySQL(t), testsupport.MustKafka(t)},
		map[string]string{"SECKILL_LOG_LEVEL": "info", "SECKILL_RELAY_LEASE": "2s"}, nil)
	writers := []*testsupport.Process{s.writer}
	s.writerEnv["SECKILL_ADMIN_ADDR"] = testsupport.FreeAddr(t)
	s.startWriter(t)
	writers = append(writers, s.writer)

	const stock, entrants = 3000, 5000
	tokens := s.sessions(t, 1, entrants)
	voucher := s.drawSale(t, stock, 8*time.Second, time.Now().Truncate(time.Second))
	entries := s.enterAll(t, voucher, tokens, 1)

	ctx := context.Background()
	keys := salestate.KeysFor(s.redis.Prefix, voucher)
	var survivor *testsupport.Process
	// Polled every millisecond: the draw serves its winners in chunks
	// for a few hundred milliseconds here, and the kill must fall inside.
	deadline := time.Now().Add(30 * time.Second)
	for {
		buyers, _ := s.redis.Client.HLen(ctx, keys.Buyers).Result()
		drawn, _ := s.redis.Client.HExists(ctx, keys.Voucher, salestate.FieldDrawn).Result()
		if drawn {
			t.Fatal("the draw was made before the test could kill its drawer: make it longer")
		}
		if buyers > 0 {
			// The holder is the writer that took the lease last: the one
			// whose "taken" line has the larger fencing token (a drawer
			// gives the lease up and takes it again under a new token).
			holder, top := -1, int64(0)
			for i, w := range writers {
				for _, m := range leaseTaken.FindAllStringSubmatch(w.Output(), -1) {
					if f, _ := strconv.ParseInt(m[1], 10, 64); f > top {
						holder, top = i, f
					}
				}
			}
			if holder < 0 {
				t.Fatal("no order-writer says it holds the draw lease")
			}
			writers[holder].Signal(t, syscall.SIGKILL)
			if drawn, _ := s.redis.Client.HExists(ctx, keys.Voucher, salestate.FieldDrawn).Result(); drawn {
				t.Fatal("the draw was made before its drawer was killed: make it longer")
			}
			t.Logf("killed the drawing order-writer with %d of %d winners served", buyers, stock)
			survivor = writers[1-holder]
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no draw under way within 30 s")
		}
		time.Sleep(time.Millisecond) // a 1 ms poll (Poll's 20 ms would miss the draw): the kill must fall inside it
	}
	s.drawnAsSeeded(t, voucher, entries, stock)
	testsupport.Wait(t, 10*time.Second, "the other order-writer to have made the draw", func() bool {
		return strings.Contains(survivor.Output(), "draw made")
	})
}

// The Redis master of a draw sale fails over in the middle of the draw and
// loses what it had of it: its replica's link is cut after the entries
// reached it, and the master is killed with SIGKILL once the drawer has
// served some winners there; the promoted replica holds the entries but no
// winner, no seed, no record of the draw. The sale pauses (another
// replication id), the writer rebuilds it from MySQL (the winners whose
// events reached Kafka), and the drawer makes the draw again from the seed
// MySQL keeps: the same winners, each served once, the stock exact.
func TestChaosDrawMasterFailsOverMidDraw(t *testing.T) {
	ctx := context.Background()
	l := newLossyRedis(t)
	master, replica := l.master, l.replica
	s := newSaleOn(t, l.stack(t), map[string]string{"SECKILL_REDIS_EPOCH_INTERVAL": "200ms"}, nil)

	const stock, entrants = 3000, 5000
	tokens := s.sessions(t, 1, entrants)
	voucher := s.drawSale(t, stock, 8*time.Second, time.Now().Truncate(time.Second))
	entries := s.enterAll(t, voucher, tokens, 1)
	l.replicated(t)
	l.link.Cut()

	keys := salestate.KeysFor("", voucher)
	deadline := time.Now().Add(30 * time.Second)
	for {
		buyers, _ := master.Client.HLen(ctx, keys.Buyers).Result()
		drawn, _ := master.Client.HExists(ctx, keys.Voucher, salestate.FieldDrawn).Result()
		if drawn {
			t.Fatal("the draw was made before the test could kill its master: make it longer")
		}
		if buyers > 0 {
			t.Logf("killing the master with %d of %d winners served there", buyers, stock)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no draw under way within 30 s")
		}
		time.Sleep(time.Millisecond) // a 1 ms poll (Poll's 20 ms would miss the draw): the kill must fall inside it
	}
	l.failOver(t)
	lost, _ := replica.Client.HLen(ctx, keys.Buyers).Result()
	held, _ := replica.Client.HLen(ctx, keys.Entrants).Result()
	if lost != 0 || held != entrants {
		t.Fatalf("the promoted replica holds %d winners and %d entries; want none of the draw and every entry", lost, held)
	}
	l.front.Switch(replica.Addr)

	s.drawnAsSeeded(t, voucher, entries, stock)
	var seed string
	if err := s.mysql.DB.QueryRow("SELECT draw_seed FROM tb_seckill_voucher WHERE voucher_id = ?", voucher).Scan(&seed); err != nil {
		t.Fatal(err)
	}
	testsupport.Wait(t, 30*time.Second, "the draw recorded again on the promoted replica, under MySQL's seed", func() bool {
		v, err := l.rdb.HMGet(ctx, keys.Voucher, salestate.FieldDrawn, salestate.FieldSeed).Result()
		return err == nil && v[0] != nil && v[1] == seed
	})
}
