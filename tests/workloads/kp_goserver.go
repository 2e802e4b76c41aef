// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)

// kp_goserver: service A of the kernel-path workloads written in Go, whose
// runtime moves a request's goroutine between threads and parks it in the
// netpoller while it waits. Each HTTP request computes 2 ms, calls
// kp_backend ("get s15": B sleeps 15 ms) on a pooled connection, computes
// 2 ms: path ≈ 19 ms. Prints "READY pid=P port=N" once listening.
//
//	kp_goserver BACKEND_PORT
package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

var backend string

var conns = sync.Pool{New: func() any {
	c, err := net.Dial("tcp", backend)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kp_goserver:", err)
		os.Exit(1)
	}
	return bufio.NewReadWriter(bufio.NewReader(c), bufio.NewWriter(c))
}}

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

func handler(w http.ResponseWriter, r *http.Request) {
	spin(2 * time.Millisecond)
	rw := conns.Get().(*bufio.ReadWriter)
	fmt.Fprintf(rw, "get s15\r\n")
	if err := rw.Flush(); err != nil {
		http.Error(w, err.Error(), 502)
		return
	}
	for {
		line, err := rw.ReadString('\n')
		if err != nil {
			http.Error(w, err.Error(), 502)
			return
		}
		if strings.HasPrefix(line, "END") {
			break
		}
	}
	conns.Put(rw)
	spin(2 * time.Millisecond)
	w.Write([]byte("ok\n"))
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kp_goserver BACKEND_PORT")
		os.Exit(2)
	}
	backend = "127.0.0.1:" + os.Args[1]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "kp_goserver:", err)
		os.Exit(1)
	}
	fmt.Printf("READY pid=%d port=%d\n", os.Getpid(), ln.Addr().(*net.TCPAddr).Port)
	http.HandleFunc("/", handler)
	http.Serve(ln, nil)
}
