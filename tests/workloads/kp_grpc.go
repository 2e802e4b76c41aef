// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)

// kp_grpc: a gRPC service and its client, built from Debian's grpc-go
// (golang-google-grpc-dev), for the HTTP/2 tests: grpc-go's HPACK encoder
// puts :path in the dynamic table, so every call after the first names its
// method by an index into it.
//
//	kp_grpc server [CERT KEY]   serves grpc.health.v1.Health (over TLS with
//	                            a certificate); prints "READY port=N"
//	kp_grpc client PORT N [tls] N rounds of 4 concurrent Check calls on one
//	                            connection; prints "DONE <calls that succeeded>"
package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	hv1 "google.golang.org/grpc/health/grpc_health_v1"
)

func serve(opts ...grpc.ServerOption) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "kp_grpc: listen:", err)
		os.Exit(1)
	}
	s := grpc.NewServer(opts...)
	hv1.RegisterHealthServer(s, health.NewServer())
	fmt.Printf("READY port=%d\n", l.Addr().(*net.TCPAddr).Port)
	if err := s.Serve(l); err != nil {
		fmt.Fprintln(os.Stderr, "kp_grpc: serve:", err)
		os.Exit(1)
	}
}

func client(port string, rounds int, secure bool) {
	creds := grpc.WithInsecure()
	if secure {
		creds = grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
			InsecureSkipVerify: true}))
	}
	conn, err := grpc.Dial("127.0.0.1:"+port, creds, grpc.WithBlock())
	if err != nil {
		fmt.Fprintln(os.Stderr, "kp_grpc: dial:", err)
		os.Exit(1)
	}
	defer conn.Close()
	c := hv1.NewHealthClient(conn)
	var mu sync.Mutex
	n := 0
	for r := 0; r < rounds; r++ {
		var wg sync.WaitGroup
		for k := 0; k < 4; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if _, err := c.Check(ctx, &hv1.HealthCheckRequest{}); err == nil {
					mu.Lock()
					n++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	fmt.Println("DONE", n)
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == "server" {
		serve()
		return
	}
	if len(os.Args) == 4 && os.Args[1] == "server" {
		c, err := credentials.NewServerTLSFromFile(os.Args[2], os.Args[3])
		if err != nil {
			fmt.Fprintln(os.Stderr, "kp_grpc:", err)
			os.Exit(1)
		}
		serve(grpc.Creds(c))
		return
	}
	if (len(os.Args) == 4 || len(os.Args) == 5) && os.Args[1] == "client" {
		if n, err := strconv.Atoi(os.Args[3]); err == nil {
			client(os.Args[2], n, len(os.Args) == 5 && os.Args[4] == "tls")
			return
		}
	}
	fmt.Fprintln(os.Stderr, "usage: kp_grpc server [CERT KEY] | kp_grpc client PORT ROUNDS [tls]")
	os.Exit(2)
}
