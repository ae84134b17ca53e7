// sarama_rw: produce N messages with sarama's default protocol version, then consume them.
// Usage: sarama_rw BOOTSTRAP TOPIC N VERSION|default none|gzip
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/Shopify/sarama"
)

func main() {
	bootstrap, topic := os.Args[1], os.Args[2]
	n, _ := strconv.Atoi(os.Args[3])
	cfg := sarama.NewConfig()
	if os.Args[4] != "default" {
		v, err := sarama.ParseKafkaVersion(os.Args[4])
		if err != nil {
			panic(err)
		}
		cfg.Version = v
	}
	if os.Args[5] == "gzip" {
		cfg.Producer.Compression = sarama.CompressionGZIP
	}
	cfg.Producer.Return.Successes = true
	producer, err := sarama.NewSyncProducer([]string{bootstrap}, cfg)
	if err != nil {
		fmt.Println("ERROR producer", err)
		os.Exit(2)
	}
	msgs := make([]*sarama.ProducerMessage, 0, n)
	for i := 0; i < n; i++ {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Partition: 0,
			Key: sarama.StringEncoder(fmt.Sprintf("k%d", i)), Value: sarama.StringEncoder(fmt.Sprintf("v%d", i))})
	}
	if err := producer.SendMessages(msgs); err != nil {
		fmt.Println("ERROR send", err)
		os.Exit(2)
	}
	producer.Close()
	consumer, err := sarama.NewConsumer([]string{bootstrap}, cfg)
	if err != nil {
		fmt.Println("ERROR consumer", err)
		os.Exit(2)
	}
	pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		fmt.Println("ERROR consume", err)
		os.Exit(2)
	}
	deadline := time.After(20 * time.Second)
	for got := 0; got < n; {
		select {
		case m := <-pc.Messages():
			fmt.Printf("%d %s %s\n", m.Offset, m.Key, m.Value)
			got++
		case e := <-pc.Errors():
			fmt.Println("ERROR", e)
			os.Exit(3)
		case <-deadline:
			fmt.Println("ERROR timeout")
			os.Exit(4)
		}
	}
	pc.Close()
	consumer.Close()
}
