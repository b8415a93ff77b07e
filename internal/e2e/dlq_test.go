package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/testsupport"
)

// seckillctl runs the built seckillctl with env and returns its output.
func seckillctl(t *testing.T, bin string, env map[string]string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Dead letters of orders that are already in MySQL (as after a writer that
// dead-lettered events MySQL had in fact taken) are listed with their
// headers and replayed onto the orders topic, twice: the writer counts
// every replay as a redelivery, and MySQL still holds each order once.
func TestDeadLettersListedAndReplayedIdempotently(t *testing.T) {
	t.Parallel()
	s := newSale(t)
	voucher := s.voucher(t, 5, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	accepted, _, _ := s.buy(t, voucher, s.sessions(t, 1, 5))
	s.audit(t, voucher, accepted, 5, 0)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ordersTopic, dlq := s.writerEnv["SECKILL_ORDERS_TOPIC"], s.writerEnv["SECKILL_ORDERS_DLQ_TOPIC"]
	events, err := broker.ReadDeadLetters(ctx, s.kafka.Brokers, ordersTopic) // any topic reads the same way
	if err != nil || len(events) != 5 {
		t.Fatalf("the orders topic holds %d events (%v), want 5", len(events), err)
	}
	dead := broker.NewWriter(s.kafka.Brokers, dlq)
	defer dead.Close()
	forwarder := &broker.Forwarder{Writer: dead}
	for _, e := range events[:2] {
		if err := forwarder.Forward(ctx, e.Message(), 1, errors.New("test: refused by MySQL")); err != nil {
			t.Fatal(err)
		}
	}

	ctl := testsupport.MustBuild(t, "../../cmd/seckillctl")
	out, err := seckillctl(t, ctl, s.writerEnv, "dlq", "list", "orders")
	if err != nil {
		t.Fatalf("dlq list: %v\n%s", err, out)
	}
	var listed []broker.DeadLetter
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var d broker.DeadLetter
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("dlq list line %q: %v", line, err)
		}
		listed = append(listed, d)
	}
	if len(listed) != 2 {
		t.Fatalf("dlq list printed %d dead letters, want 2:\n%s", len(listed), out)
	}
	for i, d := range listed {
		src := events[i]
		if d.Error != "test: refused by MySQL" || d.SourceTopic != ordersTopic || d.SourcePartition != strconv.Itoa(src.Partition) ||
			d.SourceOffset != strconv.FormatInt(src.Offset, 10) || d.Attempt != 1 || d.Value != src.Value {
			t.Fatalf("dead letter %d = %+v, want the event at %s/%d/%d with its error and attempt", i, d, ordersTopic, src.Partition, src.Offset)
		}
	}

	redelivered := func() float64 {
		_, series := families(t, "http://"+s.writerEnv["SECKILL_ADMIN_ADDR"])
		return series["seckill_orders_redelivered_total"]
	}
	before := redelivered()
	for _, args := range [][]string{{"dlq", "replay", "orders", "all"}, {"dlq", "replay", "orders", listed[0].Ref(), listed[1].Ref()}} {
		out, err := seckillctl(t, ctl, s.writerEnv, args...)
		if err != nil || !strings.Contains(out, "2 message(s) of "+dlq+" put back on "+ordersTopic) {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	if !testsupport.PollEvery(30*time.Second, 100*time.Millisecond, func() bool { return redelivered()-before >= 4 }) {
		t.Fatalf("the writer counted %v redeliveries after two replays of two dead letters, want 4", redelivered()-before)
	}
	s.audit(t, voucher, accepted, 5, 0)

	if out, err := seckillctl(t, ctl, s.writerEnv, "dlq", "replay", "orders", "9:999"); err == nil || !strings.Contains(out, `no dead letter at "9:999"`) {
		t.Fatalf("a replay of a dead letter that is not there: %v\n%s", err, out)
	}
	if out, err := seckillctl(t, ctl, s.writerEnv, "dlq", "list", "payments"); err == nil || !strings.Contains(out, "not a family") {
		t.Fatalf("dlq of an unknown family: %v\n%s", err, out)
	}
}
