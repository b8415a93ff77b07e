package e2e

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// What cannot work stops the launchers with a message that names it, and
// nothing is started: run.sh's programs here are stand-ins that leave a
// mark when they run.
func TestLaunchersRefuseBadInput(t *testing.T) {
	bin := t.TempDir()
	started := filepath.Join(t.TempDir(), "started")
	for _, p := range []string{"api", "order-writer", "cache-invalidator", "seckillctl"} {
		script := "#!/bin/sh\necho " + p + " >> " + started + "\nsleep 30\n"
		if err := os.WriteFile(filepath.Join(bin, p), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	lb, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	for _, c := range []struct {
		name   string
		script string
		args   []string
		env    []string
		want   string
	}{
		{"api instances not a number", "run.sh", nil, []string{"SECKILL_API_INSTANCES=two"}, "SECKILL_API_INSTANCES=two: say how many api instances"},
		{"no order-writer", "run.sh", nil, []string{"SECKILL_ORDER_WRITERS=0"}, "SECKILL_ORDER_WRITERS=0: say how many order-writers"},
		{"the load balancer's port taken", "run.sh", nil, []string{"SECKILL_API_INSTANCES=2", "SECKILL_API_ADDR=" + lb.Addr().String()},
			"the load balancer's address " + lb.Addr().String() + " is taken"},
		{"a TLS switch that is neither", "run.sh", nil, []string{"SECKILL_DEV_TLS=maybe"}, "SECKILL_DEV_TLS=maybe: true or false"},
		{"TLS on several instances", "run.sh", nil, []string{"SECKILL_DEV_TLS=true", "SECKILL_API_INSTANCES=2"}, "one instance only"},
		{"two Kafka brokers", "stack.sh", []string{"up", "--kafka-brokers", "2"}, nil, "the stack runs one broker, or a cluster of 3"},
		{"a Kafka topology that is none", "stack.sh", []string{"up"}, []string{"SECKILL_KAFKA_TOPOLOGY=triple"}, "SECKILL_KAFKA_TOPOLOGY=triple: say single or cluster"},
		{"a Redis topology that is none", "stack.sh", []string{"up"}, []string{"SECKILL_REDIS_TOPOLOGY=ring"}, "SECKILL_REDIS_TOPOLOGY=ring: say single or cluster"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command("../../deploy/local/"+c.script, c.args...)
			cmd.Env = append(append(os.Environ(), "SECKILL_BIN_DIR="+bin, "SECKILL_STACK_DIR="+t.TempDir()), c.env...)
			out, err := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); err == nil || code == 0 {
				t.Fatalf("%s %v exited %d; want refused\n%s", c.script, c.args, code, out)
			}
			if !strings.Contains(string(out), c.want) {
				t.Fatalf("%s said %q; want it to say %q", c.script, out, c.want)
			}
			if b, err := os.ReadFile(started); err == nil {
				t.Fatalf("programs started before the refusal: %s", b)
			}
		})
	}
}
