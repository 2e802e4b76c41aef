// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)

// gotls_server: bench_tls_overhead's Go workload. An HTTPS server in Go
// (net/http over crypto/tls, HTTP/1.1 only) that answers every request with
// a 4-byte body and does nothing else, so the cost of the uprobes on
// crypto/tls is most of what a traced run adds.
//
//	gotls_server PORT CERT KEY
package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: gotls_server PORT CERT KEY")
		os.Exit(2)
	}
	cert, err := tls.LoadX509KeyPair(os.Args[2], os.Args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, "gotls_server:", err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "gotls_server:", err)
		os.Exit(1)
	}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "aaa\n")
	})
	srv := &http.Server{TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert},
		NextProtos: []string{"http/1.1"}}}
	fmt.Fprintln(os.Stderr, "gotls_server:", srv.ServeTLS(ln, "", ""))
	os.Exit(1)
}
