// Command floor serves the accept path's I/O and nothing else (package
// floor), for make bench to measure the api's accept path against.
//
//	floor -addr 127.0.0.1:18089
//
// It reads SECKILL_REDIS_ADDR or SECKILL_REDIS_CLUSTER, SECKILL_KAFKA_BROKERS
// and SECKILL_KEY_PREFIX as the programs do, writes to the topic
// seckill.floor (made at start, deleted at exit) and stops on SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/seckill/seckill/bench/internal/floor"
	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/redisconn"
)

const topic = "seckill.floor"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:18089", "listen address")
	flag.Parse()
	common, sale, err := config.LoadCommon(os.LookupEnv)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	rdb, err := redisconn.New(common.Redis)
	if err != nil {
		return err
	}
	defer rdb.Close()
	replicas := min(len(common.KafkaBrokers), 3)
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = broker.EnsureTopics(tctx, common.KafkaBrokers, broker.Topic{Name: topic, Partitions: 3, Replicas: replicas, MinInSync: min(replicas, 2)})
	cancel()
	if err != nil {
		return err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = broker.DeleteTopics(dctx, common.KafkaBrokers, topic)
	}()
	p := broker.NewProducer(common.KafkaBrokers, topic, 0)
	// The api's spacing, so that the two differ only in the work around
	// the I/O.
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	p.Linger, err = broker.Linger(lctx, common.KafkaBrokers, topic)
	cancel()
	if err != nil {
		return err
	}
	defer p.Close()
	srv := &http.Server{Addr: *addr, Handler: (&floor.Server{Redis: rdb, Producer: p, Prefix: sale.KeyPrefix}).Handler()}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
