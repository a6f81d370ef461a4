// Command quicsm-quicgo is the quicsm lab program for quic-go: an HTTP/3 server that answers
// GET /<n> with n bytes, and a client that fetches pages of objects and prints one JSON line.
// The same source builds against every quic-go release the lab pins (see build.sh).
//
//	quicsm-quicgo server --listen HOST:PORT --qlog-dir DIR
//	quicsm-quicgo client --connect HOST:PORT --objects N --object-size BYTES --qlog-dir DIR [--parallel P]
//	                     [--read-mbit R --read-interval-ms I]
//
// With --read-mbit the client is a slow receiving application (the lab's phone profile): it
// reads each response in bursts, every I ms as much as R Mbit/s allows since the response
// began, so quic-go returns flow-control credit (MAX_STREAM_DATA, MAX_DATA) only as it reads.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/qlog"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: quicsm-quicgo server|client [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "server":
		err = runServer(os.Args[2:])
	case "client":
		err = runClient(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q (expected server or client)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// quicConfig makes quic-go write one qlog file per connection into dir (QLOGDIR is how the
// qlog package of every pinned release is told where to write).
func quicConfig(dir string) (*quic.Config, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.Setenv("QLOGDIR", dir); err != nil {
		return nil, err
	}
	return &quic.Config{
		Tracer:         qlog.DefaultConnectionTracer,
		MaxIdleTimeout: 30 * time.Second,
	}, nil
}

// selfSignedCert makes a throw-away certificate for the loopback lab; nothing is stored.
func selfSignedCert() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "quicsm-lab"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// objectHandler answers GET /<n> with n bytes.
func objectHandler(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.ParseInt(strings.TrimPrefix(r.URL.Path, "/"), 10, 64)
	if err != nil || n < 0 {
		http.Error(w, "expected GET /<number of bytes>", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	buf := make([]byte, 64<<10)
	for i := range buf {
		buf[i] = byte('a' + i%26)
	}
	for n > 0 {
		chunk := min(n, int64(len(buf)))
		if _, err := w.Write(buf[:chunk]); err != nil {
			return
		}
		n -= chunk
	}
}

func runServer(args []string) error {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:4433", "UDP address to listen on")
	qlogDir := fs.String("qlog-dir", "qlog", "directory for qlog files")
	if err := fs.Parse(args); err != nil {
		return err
	}
	qconf, err := quicConfig(*qlogDir)
	if err != nil {
		return err
	}
	cert, err := selfSignedCert()
	if err != nil {
		return err
	}
	addr, err := net.ResolveUDPAddr("udp", *listen)
	if err != nil {
		return err
	}
	conn, err := net.ListenUDP("udp", addr)
	if err != nil {
		return err
	}
	srv := &http3.Server{
		Handler:    http.HandlerFunc(objectHandler),
		TLSConfig:  &tls.Config{Certificates: []tls.Certificate{cert}},
		QUICConfig: qconf,
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(conn) }()
	fmt.Println("ready")
	select {
	case <-sigs:
		// Closing the server closes its connections, which flushes their qlog files.
		err := srv.Close()
		<-done
		return err
	case err := <-done:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

type result struct {
	OK           bool    `json:"ok"`
	Bytes        int64   `json:"bytes"`
	CompletionMS float64 `json:"completion_ms"`
	Error        *string `json:"error"`
}

func runClient(args []string) error {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	connect := fs.String("connect", "127.0.0.1:4433", "server UDP address")
	objects := fs.Int("objects", 1, "number of objects in the page")
	size := fs.Int64("object-size", 1<<20, "bytes per object")
	parallel := fs.Int("parallel", 1, "concurrent requests")
	qlogDir := fs.String("qlog-dir", "qlog", "directory for qlog files")
	timeout := fs.Duration("timeout", 120*time.Second, "give up after this long")
	readMbit := fs.Float64("read-mbit", 0, "read each response at most this fast, Mbit/s (0: at once)")
	readEveryMS := fs.Float64("read-interval-ms", 20, "with --read-mbit: read a burst this often, ms")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *objects < 1 || *size < 0 || *parallel < 1 {
		return errors.New("--objects and --parallel must be >= 1 and --object-size >= 0")
	}
	if *readMbit < 0 || *readEveryMS <= 0 {
		return errors.New("--read-mbit must be >= 0 and --read-interval-ms > 0")
	}
	reader = pacedReader{bytesPerSec: *readMbit * 1e6 / 8, every: time.Duration(*readEveryMS * float64(time.Millisecond))}
	qconf, err := quicConfig(*qlogDir)
	if err != nil {
		return err
	}
	tr := &http3.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // lab certificate is self-signed
		QUICConfig:      qconf,
	}
	client := &http.Client{Transport: tr, Timeout: *timeout}
	start := time.Now()
	total, ferr := fetchAll(client, *connect, *objects, *size, *parallel)
	elapsed := time.Since(start)
	// Closing the transport closes the connection, which flushes the client's qlog file.
	_ = tr.Close()
	res := result{OK: ferr == nil, Bytes: total, CompletionMS: float64(elapsed.Microseconds()) / 1000}
	if ferr != nil {
		msg := ferr.Error()
		res.Error = &msg
	}
	line, err := json.Marshal(res)
	if err != nil {
		return err
	}
	fmt.Println(string(line))
	// Give the server a moment to receive CONNECTION_CLOSE before this process exits.
	time.Sleep(50 * time.Millisecond)
	return nil
}

func fetchAll(client *http.Client, hostport string, objects int, size int64, parallel int) (int64, error) {
	url := fmt.Sprintf("https://%s/%d", hostport, size)
	jobs := make(chan struct{}, objects)
	for range objects {
		jobs <- struct{}{}
	}
	close(jobs)
	var (
		mu       sync.Mutex
		total    int64
		firstErr error
		wg       sync.WaitGroup
	)
	for range min(parallel, objects) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				n, err := fetchOne(client, url, size)
				mu.Lock()
				total += n
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	return total, firstErr
}

func fetchOne(client *http.Client, url string, size int64) (int64, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := reader.drain(resp.Body)
	if err != nil {
		return n, err
	}
	if resp.StatusCode != http.StatusOK {
		return n, fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
	}
	if n != size {
		return n, fmt.Errorf("GET %s: got %d bytes, expected %d", url, n, size)
	}
	return n, nil
}

// pacedReader is the receiving application: bytesPerSec 0 reads everything at once.
type pacedReader struct {
	bytesPerSec float64
	every       time.Duration
}

var reader pacedReader

// drain reads body to its end. A paced reader wakes every p.every and reads until it has read
// what bytesPerSec allows since the first wake-up (blocking, as any reader, when the data is not
// there yet), then sleeps to the next wake-up; unread data waits in quic-go's stream buffer.
func (p pacedReader) drain(body io.Reader) (int64, error) {
	if p.bytesPerSec <= 0 {
		return io.Copy(io.Discard, body)
	}
	buf := make([]byte, 64<<10)
	var n int64
	start := time.Now()
	for tick := 1; ; tick++ {
		allowed := int64(p.bytesPerSec * (time.Duration(tick) * p.every).Seconds())
		for n < allowed {
			k, err := body.Read(buf[:min(int64(len(buf)), allowed-n)])
			n += int64(k)
			if errors.Is(err, io.EOF) {
				return n, nil
			}
			if err != nil {
				return n, err
			}
		}
		time.Sleep(time.Until(start.Add(time.Duration(tick) * p.every)))
	}
}
