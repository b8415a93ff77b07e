// Command loadgen drives a running API with vegeta and prints what it
// measured.
//
//	loadgen login [-api URL] [-redis ADDR] [-users N] [-workers N]
//
// login needs the API started with SECKILL_RATE_LOGIN_IP=off (every request
// comes from one address) and the Redis the API uses, to issue the codes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/loadgen"
)

const usage = "usage: loadgen login [-api URL] [-redis ADDR] [-users N] [-workers N]"

func main() {
	if len(os.Args) < 2 || os.Args[1] != "login" {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	fs := flag.NewFlagSet("login", flag.ExitOnError)
	apiURL := fs.String("api", "http://127.0.0.1:8081", "the API's base URL")
	redisAddr := fs.String("redis", "127.0.0.1:16379", "the API's Redis")
	users := fs.Int("users", 5000, "distinct users, each logging in twice")
	workers := fs.Uint64("workers", 32, "concurrent clients")
	_ = fs.Parse(os.Args[2:])
	if *users < 1 || *workers < 1 {
		fmt.Fprintln(os.Stderr, "loadgen: -users and -workers must be at least 1")
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: *redisAddr, DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
	defer rdb.Close()
	reports, err := loadgen.Login(ctx, rdb, loadgen.LoginConfig{API: *apiURL, Users: *users, Workers: *workers})
	loadgen.Fprint(os.Stdout, reports...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}
