package api

import (
	"context"
	"fmt"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// BenchmarkPostMessageHTTP is inbound messages/s through the whole daemon
// path: HTTP, auth, strict decode, resolve, authorize, durable insert.
func BenchmarkPostMessageHTTP(b *testing.B) {
	srv, _ := newServer(b)
	c := NewClient(srv.URL, adminToken)
	ctx := context.Background()
	if _, err := c.AddFolder(ctx, store.Folder{Path: "corp"}); err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			if _, err := c.PostMessage(ctx, service.MessageIn{ChatJID: "web:corp", Sender: "u", Text: fmt.Sprint("m", i)}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
