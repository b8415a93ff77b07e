// Package floor is the accept path's I/O and nothing else: an echo route,
// one EVALSHA of a script of the gate's shape, one produce to Kafka with
// acks from every in-sync replica, the answer. No session, no limiter, no
// order-id lease, no sale window, no trace: the rate it reaches on a
// machine is what the api's accept path is measured against (make bench).
package floor

import (
	"context"
	_ "embed"
	"fmt"
	"hash/fnv"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/broker"
	"github.com/seckill/seckill/internal/order"
)

//go:embed floor.lua
var source string

var script = redis.NewScript(source)

// Keys are a sale's keys: stock, buyers, reservations.
func Keys(prefix string, voucher int64) []string {
	tag := fmt.Sprintf("%sfloor:{%d}", prefix, voucher)
	return []string{tag + ":stock", tag + ":buyers", tag + ":reserved"}
}

// Stock puts n units of voucher on sale, its buyers and reservations
// cleared.
func Stock(ctx context.Context, rdb redis.UniversalClient, prefix string, voucher int64, n int) error {
	k := Keys(prefix, voucher)
	if err := rdb.Del(ctx, k[1], k[2]).Err(); err != nil {
		return err
	}
	return rdb.Set(ctx, k[0], n, time.Hour).Err()
}

// Server answers POST /voucher-order/seckill/:id as the api does, with
// the accept path's I/O only.
type Server struct {
	Redis    redis.UniversalClient
	Producer *broker.Producer
	Prefix   string
	ids      atomic.Int64
}

type result struct {
	Success  bool   `json:"success"`
	ErrorMsg string `json:"errorMsg,omitempty"`
	Data     any    `json:"data,omitempty"`
}

// Handler is the echo server of the one route.
func (s *Server) Handler() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.POST("/voucher-order/seckill/:id", s.order)
	return e
}

func (s *Server) order(c echo.Context) error {
	voucher, err := strconv.ParseInt(c.Param("id"), 10, 64)
	buyer := c.Request().Header.Get("Authorization")
	if err != nil || voucher <= 0 || buyer == "" {
		return c.JSON(http.StatusBadRequest, result{ErrorMsg: "a voucher id and an Authorization header"})
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), 3*time.Second)
	defer cancel()
	id := time.Now().UnixMilli()<<20 | s.ids.Add(1)&(1<<20-1)
	outcome, err := script.Run(ctx, s.Redis, Keys(s.Prefix, voucher), buyer, id).Int()
	if err != nil {
		return c.JSON(http.StatusServiceUnavailable, result{ErrorMsg: err.Error()})
	}
	switch outcome {
	case 1:
		return c.JSON(http.StatusOK, result{ErrorMsg: "already bought"})
	case 2:
		return c.JSON(http.StatusOK, result{ErrorMsg: "sold out"})
	}
	h := fnv.New64a()
	h.Write([]byte(buyer))
	e := order.Event{OrderID: id, UserID: int64(h.Sum64() >> 1), VoucherID: voucher, AcceptedAt: time.Now().UnixMilli()}
	if err := s.Producer.WriteMessages(ctx, broker.OrderMessage(e)); err != nil {
		return c.JSON(http.StatusServiceUnavailable, result{ErrorMsg: err.Error()})
	}
	return c.JSON(http.StatusOK, result{Success: true, Data: strconv.FormatInt(id, 10)})
}
