// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)

// kp_gotls: an HTTPS server written in Go (net/http over crypto/tls, HTTP/2
// and HTTP/1.1 by ALPN), whose TLS runs in the executable: no libssl, no
// symbol of OpenSSL. Each request computes about 1 ms and answers its path
// back. Prints "READY pid=P port=N" once listening.
//
//	kp_gotls PORT CERT KEY
package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

var sink int

func spin(d time.Duration) {
	x := 0
	for end := time.Now().Add(d); time.Now().Before(end); {
		for i := 0; i < 1000; i++ {
			x += i
		}
	}
	sink += x
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: kp_gotls PORT CERT KEY")
		os.Exit(2)
	}
	cert, err := tls.LoadX509KeyPair(os.Args[2], os.Args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, "kp_gotls:", err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "kp_gotls:", err)
		os.Exit(1)
	}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		spin(time.Millisecond)
		fmt.Fprintf(w, "ok %s\n", r.URL.Path)
	})
	srv := &http.Server{TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert},
		NextProtos: []string{"h2", "http/1.1"}}}
	fmt.Printf("READY pid=%d port=%d\n", os.Getpid(), ln.Addr().(*net.TCPAddr).Port)
	os.Stdout.Sync()
	fmt.Fprintln(os.Stderr, "kp_gotls:", srv.ServeTLS(ln, "", ""))
	os.Exit(1)
}
