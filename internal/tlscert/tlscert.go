// Package tlscert serves the API's certificate and follows its files: a
// certificate renewed on disk is served from the next handshake on, with
// no restart.
package tlscert

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// Reloader holds the certificate of a cert and key file pair.
type Reloader struct {
	certFile, keyFile string
	logger            *slog.Logger

	mu      sync.RWMutex
	current *tls.Certificate
	seen    [2]stamp
}

// stamp tells a changed file: a rename over it (how cert-manager, certbot
// and Kubernetes swap secrets) changes the inode's times and size as an
// edit does.
type stamp struct {
	mod  time.Time
	size int64
}

// Load reads the pair; a pair that does not load stops the start.
func Load(certFile, keyFile string, logger *slog.Logger) (*Reloader, error) {
	r := &Reloader{certFile: certFile, keyFile: keyFile, logger: logger}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload reads the pair again and serves it from the next handshake.
func (r *Reloader) Reload() error {
	stamps, err := r.stamps()
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("tls certificate %s and key %s: %w", r.certFile, r.keyFile, err)
	}
	r.mu.Lock()
	r.current, r.seen = &cert, stamps
	r.mu.Unlock()
	return nil
}

func (r *Reloader) stamps() ([2]stamp, error) {
	var out [2]stamp
	for i, f := range []string{r.certFile, r.keyFile} {
		st, err := os.Stat(f)
		if err != nil {
			return out, fmt.Errorf("tls: %w", err)
		}
		out[i] = stamp{st.ModTime(), st.Size()}
	}
	return out, nil
}

// GetCertificate is tls.Config's.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.current, nil
}

// Run checks the files every interval until ctx ends and reloads a pair
// that changed. A pair that does not load (the key written before the
// certificate, say) is logged and the old one served until the next check.
// Polling rather than inotify: a watch on a file is lost when a symlink
// swap replaces it, and one stat a second costs nothing.
func (r *Reloader) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		stamps, err := r.stamps()
		r.mu.RLock()
		same := stamps == r.seen
		r.mu.RUnlock()
		if err == nil && same {
			continue
		}
		if err := r.Reload(); err != nil {
			r.logger.Warn("tls: the certificate changed on disk but does not load; still serving the previous one", "err", err)
			continue
		}
		r.logger.Info("tls: certificate reloaded", "cert", r.certFile)
	}
}

// ServerConfig is the API's TLS: 1.2 and up, forward-secret AEAD suites
// only (TLS 1.3's are all such, and not configurable), HTTP/2 offered.
func (r *Reloader) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: r.GetCertificate,
		NextProtos:     []string{"h2", "http/1.1"},
		CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		},
	}
}
