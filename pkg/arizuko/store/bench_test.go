package store

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkPutMessage is inbound messages persisted (committed durably: SQLite with
// synchronous=FULL; the test cluster runs with fsync off) one after another, per backend.
func BenchmarkPutMessage(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			s := openT(b, be)
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, _, err := s.PutMessage(ctx, Message{ChatJID: fmt.Sprintf("tg:%d", i%20), Sender: "u", Text: "hello world", Folder: "corp"}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkPutMessageParallel is the same with concurrent writers, as many
// adapters posting at once would be.
func BenchmarkPutMessageParallel(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			s := openT(b, be)
			ctx := context.Background()
			var n atomic.Int64
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					if _, _, err := s.PutMessage(ctx, Message{ChatJID: fmt.Sprintf("tg:%d", i%20), Sender: "u", Text: "hello world"}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
