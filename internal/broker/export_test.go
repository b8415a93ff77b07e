package broker

import (
	"context"
	"net"
	"sync/atomic"
)

// CountDials makes d count the connections it opens; the count.
func (d *Durability) CountDials() *atomic.Int64 {
	var n atomic.Int64
	d.dialer.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		n.Add(1)
		return (&net.Dialer{Timeout: probeTimeout}).DialContext(ctx, network, addr)
	}
	return &n
}

// CloseConns closes the connections d keeps (Run does as it returns).
func (d *Durability) CloseConns() { d.closeConns() }
