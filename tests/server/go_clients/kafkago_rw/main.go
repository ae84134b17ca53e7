// kafkago_rw: write N messages to partition 0 with kafka-go, then read them back.
// Usage: kafkago_rw BOOTSTRAP TOPIC N
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	kafka "github.com/segmentio/kafka-go"
)

func main() {
	bootstrap, topic := os.Args[1], os.Args[2]
	n, _ := strconv.Atoi(os.Args[3])
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := kafka.DialLeader(ctx, "tcp", bootstrap, topic, 0)
	if err != nil {
		fmt.Println("ERROR dial", err)
		os.Exit(2)
	}
	msgs := make([]kafka.Message, 0, n)
	for i := 0; i < n; i++ {
		msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%d", i))})
	}
	if _, err := conn.WriteMessages(msgs...); err != nil {
		fmt.Println("ERROR write", err)
		os.Exit(2)
	}
	conn.Close()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{bootstrap}, Topic: topic, Partition: 0,
		MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	for got := 0; got < n; got++ {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			fmt.Println("ERROR read", err)
			os.Exit(3)
		}
		fmt.Printf("%d %s %s\n", m.Offset, m.Key, m.Value)
	}
}
