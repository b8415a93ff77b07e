package testsupport

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to a server that can be cut off or
// replaced: the address programs keep while a failover moves the service
// (what a virtual IP, a DNS name or a cloud endpoint gives them), or a
// replication link that a test partitions.
type Proxy struct {
	Addr string

	ln     net.Listener
	mu     sync.Mutex
	target string // "" refuses: connections are closed at once
	conns  map[net.Conn]struct{}
}

// MustProxy forwards to target until the test ends.
func MustProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.accept()
	tb.Cleanup(func() {
		ln.Close()
		p.Cut()
	})
	return p
}

// Cut closes every connection and refuses new ones: a partition.
func (p *Proxy) Cut() { p.Switch("") }

// Switch closes every connection; new ones go to target.
func (p *Proxy) Switch(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(client)
	}
}

func (p *Proxy) forward(client net.Conn) {
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	if target == "" {
		client.Close()
		return
	}
	server, err := net.Dial("tcp", target)
	if err != nil {
		client.Close()
		return
	}
	p.mu.Lock()
	if p.target != target {
		// Switched while dialling.
		p.mu.Unlock()
		client.Close()
		server.Close()
		return
	}
	p.conns[client], p.conns[server] = struct{}{}, struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, pair := range [][2]net.Conn{{server, client}, {client, server}} {
		wg.Go(func() {
			_, _ = io.Copy(pair[0], pair[1])
			pair[0].Close()
			pair[1].Close()
		})
	}
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}
