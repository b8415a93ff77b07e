package api_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/testsupport"
	"github.com/seckill/seckill/internal/tlscert"
)

// The API over TLS, with a certificate made in the test: HTTP/2 by ALPN,
// HSTS on the answers, TLS 1.1 refused, and a certificate replaced on disk
// served without a restart.
func TestTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile, err := tlscert.WriteDev(dir, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	a := startAPIWith(t, map[string]string{"SECKILL_TLS_CERT": certFile, "SECKILL_TLS_KEY": keyFile}, true, "https")
	addr := strings.TrimPrefix(a.URL, "https://")

	trust := func() *x509.CertPool {
		pool := x509.NewCertPool()
		pem, err := os.ReadFile(certFile)
		if err != nil || !pool.AppendCertsFromPEM(pem) {
			t.Fatalf("read %s: %v", certFile, err)
		}
		return pool
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: trust()}, ForceAttemptHTTP2: true}}
	res, err := client.Get(a.URL + "/shop-type/list")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.ProtoMajor != 2 {
		t.Fatalf("protocol %s, want HTTP/2", res.Proto)
	}
	if hsts := res.Header.Get("Strict-Transport-Security"); !strings.HasPrefix(hsts, "max-age=31536000") {
		t.Fatalf("Strict-Transport-Security %q", hsts)
	}

	for _, v := range []uint16{tls.VersionTLS10, tls.VersionTLS11} {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: trust(), MinVersion: v, MaxVersion: v})
		if err == nil {
			conn.Close()
			t.Fatalf("a TLS %s handshake succeeded", tls.VersionName(v))
		}
	}
	if _, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: trust(), MaxVersion: tls.VersionTLS12,
		CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}}); err == nil {
		t.Fatal("a TLS 1.2 handshake with only CBC suites succeeded")
	}

	served := func() []byte {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Raw
	}
	before := served()
	if _, _, err := tlscert.WriteDev(dir, time.Hour); err != nil {
		t.Fatal(err)
	}
	testsupport.Wait(t, 5*time.Second, "the certificate replaced on disk served", func() bool { return string(served()) != string(before) })
	client.CloseIdleConnections()
	if res, err := client.Get(a.URL + "/healthz"); err == nil {
		res.Body.Close()
		t.Fatal("the client trusted the old certificate and still got through: the new one is not served")
	}
	client.CloseIdleConnections()
	client.Transport.(*http.Transport).TLSClientConfig.RootCAs = trust()
	if res, err := client.Get(a.URL + "/healthz"); err != nil || res.StatusCode != 200 {
		t.Fatalf("with the new certificate trusted: %v", err)
	}
}
