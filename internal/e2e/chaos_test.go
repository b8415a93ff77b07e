//go:build chaos

package e2e

// The failure tests stop and start the shared servers, so they run alone:
// `make test` runs them after the main suite, with -tags chaos -p 1.

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill/seckill/internal/testsupport"
)

func stackCtl(t *testing.T, args ...string) {
	t.Helper()
	path := os.Getenv("SECKILL_TEST_STACK")
	if path == "" {
		t.Fatal("SECKILL_TEST_STACK must name deploy/local/stack.sh: these tests stop and start the servers (make test sets it)")
	}
	out, err := exec.Command(path, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("stack.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// Kafka stops in the middle of a sale: the API answers each order clearly
// (accepted, or 503 saying whether the order was reserved or not taken);
// once Kafka is back every accepted or reserved order ends in MySQL and
// MySQL holds exactly the units Redis gave out.
func TestChaosKafkaStopsDuringSale(t *testing.T) {
	s := newSale(t)
	t.Cleanup(func() { stackCtl(t, "up") })
	voucher := s.voucher(t, 300, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	tokens := s.sessions(t, 1, 600)

	accepted, _, _ := s.buy(t, voucher, tokens[:100])
	if len(accepted) != 100 {
		t.Fatalf("%d accepted before the outage, want 100", len(accepted))
	}
	stackCtl(t, "stop", "kafka")
	ok, reserved, msgs := s.buy(t, voucher, tokens[100:300])
	accepted = append(accepted, ok...)
	for msg, n := range msgs {
		if !strings.HasPrefix(msg, "503 flash sale temporarily unavailable: your order was not taken") {
			t.Errorf("%d × %q during the outage: not a clear answer", n, msg)
		}
	}
	t.Logf("during the outage: %d accepted, %d reserved, other answers %v", len(ok), len(reserved), msgs)
	stackCtl(t, "up")
	testsupport.Eventually(t, s.api+"/readyz", 200, 60*time.Second)

	more, moreReserved, _ := s.buy(t, voucher, tokens[300:])
	accepted = append(append(append(accepted, more...), reserved...), moreReserved...)
	taken := len(accepted)
	if taken > 300 {
		t.Fatalf("%d orders accepted or reserved on a stock of 300", taken)
	}
	s.audit(t, voucher, accepted, taken, 300-taken)
}

// MySQL stops while the writer runs: the writer commits no offset and
// skips nothing; once MySQL is back every order lands.
func TestChaosMySQLStopsUnderTheWriter(t *testing.T) {
	s := newSale(t)
	t.Cleanup(func() { stackCtl(t, "up") })
	voucher := s.voucher(t, 200, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	tokens := s.sessions(t, 1, 200)

	first, _, _ := s.buy(t, voucher, tokens[:100])
	s.audit(t, voucher, first, 100, 100)
	committed := committedOffsets(t, s)
	if committed != 100 {
		t.Fatalf("committed offsets %d after 100 orders landed, want 100", committed)
	}

	stackCtl(t, "stop", "mariadb")
	second, _, _ := s.buy(t, voucher, tokens[100:])
	if len(second) != 100 {
		t.Fatalf("%d accepted while MySQL is down, want 100: the hot path needs no MySQL", len(second))
	}
	time.Sleep(3 * time.Second)
	if now := committedOffsets(t, s); now != committed {
		t.Fatalf("offsets moved from %d to %d while MySQL was down", committed, now)
	}
	stackCtl(t, "up")
	s.audit(t, voucher, append(first, second...), 200, 0)
}

// Redis restarts (its data kept by the AOF, its script cache gone): the
// gate answers NOSCRIPT, go-redis reloads the script, the sale goes on.
func TestChaosRedisRestart(t *testing.T) {
	s := newSale(t)
	t.Cleanup(func() { stackCtl(t, "up") })
	voucher := s.voucher(t, 20, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	tokens := s.sessions(t, 1, 20)
	first, _, _ := s.buy(t, voucher, tokens[:10])
	// appendfsync everysec: let the last second reach the disk.
	time.Sleep(1500 * time.Millisecond)
	stackCtl(t, "stop", "redis")
	stackCtl(t, "up")
	testsupport.Eventually(t, s.api+"/readyz", 200, 30*time.Second)
	second, _, msgs := s.buy(t, voucher, tokens[10:])
	if len(second) != 10 {
		t.Fatalf("after the Redis restart: %d accepted, %v", len(second), msgs)
	}
	s.audit(t, voucher, append(first, second...), 20, 0)
}

func committedOffsets(t *testing.T, s *sale) int64 {
	t.Helper()
	topic := s.writerEnv["SECKILL_ORDERS_TOPIC"]
	client := &kafka.Client{Addr: kafka.TCP(s.kafka.Brokers...), Timeout: 10 * time.Second}
	res, err := client.OffsetFetch(context.Background(), &kafka.OffsetFetchRequest{
		GroupID: s.writerEnv["SECKILL_ORDER_GROUP"], Topics: map[string][]int{topic: {0, 1, 2, 3, 4, 5}}})
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, p := range res.Topics[topic] {
		if p.CommittedOffset > 0 {
			total += p.CommittedOffset
		}
	}
	return total
}
