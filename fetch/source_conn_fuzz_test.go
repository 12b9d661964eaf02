package fetch

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fuzzMaxResponseBytes is the frame cap of the fuzzed connection. It is
// far above any input, so a size header that claims more than was sent is
// what the allocation bound is tested against.
const fuzzMaxResponseBytes = 4 << 20

// fuzzMetadataFrame is a whole Metadata response frame as a broker sends
// it to the first request of a connection (correlation id 0).
func fuzzMetadataFrame(version int16) []byte {
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = version
	for id := range int32(3) {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = id, "broker-1.example", 9092+id
		resp.Brokers = append(resp.Brokers, b)
	}
	resp.ClusterID = kmsg.StringPtr("src")
	for _, name := range []string{"orders", "payments"} {
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic = kmsg.StringPtr(name)
		rt.TopicID = [16]byte{1, 2, 3, byte(len(name))}
		for p := range int32(2) {
			rp := kmsg.NewMetadataResponseTopicPartition()
			rp.Partition, rp.Leader, rp.LeaderEpoch = p, p, 7
			rp.Replicas, rp.ISR = []int32{0, 1, 2}, []int32{0, 1}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return scResponseFrame(0, resp)
}

// FuzzResponseFrame feeds arbitrary bytes as a broker's whole reply (size
// header included) to roundTrip of a Metadata request, written in two
// halves (the nats trick: the reader must cope with any split). It must
// return an error that closed the connection, or a decoded response; it
// never panics and never allocates more than the frame cap.
func FuzzResponseFrame(f *testing.F) {
	for _, v := range []int16{0, 1, 5, 8, 9, 12} {
		frame := fuzzMetadataFrame(v)
		f.Add(uint8(v), frame)
		f.Add(uint8(v), frame[:len(frame)/2])
		f.Add(uint8(v), append(frame[:len(frame):len(frame)], 0xff, 0xff))
	}
	wrongCorr := fuzzMetadataFrame(9)
	wrongCorr[7] = 1
	f.Add(uint8(9), wrongCorr)
	f.Add(uint8(1), []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})                    // negative size
	f.Add(uint8(1), []byte{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0})                    // above the cap
	f.Add(uint8(1), []byte{0x00, 0x3f, 0xff, 0xff, 0, 0, 0, 0, 1, 2, 3})           // claims 4 MiB, sends 7 bytes
	f.Add(uint8(9), []byte{0, 0, 0, 8, 0, 0, 0, 0, 1, 0, 0x7f, 0})                 // header tag past the end
	f.Add(uint8(9), []byte{0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0})                 // flexible, truncated body
	f.Add(uint8(1), []byte{0, 0, 0, 12, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff, 0, 0}) // 2 Gi brokers
	f.Add(uint8(0), []byte{})

	f.Fuzz(func(t *testing.T, ver uint8, reply []byte) {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = int16(ver) % (req.MaxVersion() + 1)
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("orders")
		req.Topics = append(req.Topics, rt)

		client, server := net.Pipe()
		served := make(chan struct{})
		go func() {
			defer close(served)
			defer server.Close()
			var hdr [4]byte
			if _, err := io.ReadFull(server, hdr[:]); err != nil {
				return
			}
			if _, err := io.CopyN(io.Discard, server, int64(binary.BigEndian.Uint32(hdr[:]))); err != nil {
				return
			}
			half := len(reply) / 2
			if _, err := server.Write(reply[:half]); err != nil {
				return
			}
			server.Write(reply[half:])
		}()
		defer func() { <-served }()

		c := newSourceConn(client, "pipe", sourceConnConfig{
			MaxResponseBytes: fuzzMaxResponseBytes,
			RequestTimeout:   10 * time.Second,
		})
		defer c.Close()
		resp := kmsg.NewPtrMetadataResponse()

		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := c.roundTrip(context.Background(), req, resp)
		runtime.ReadMemStats(&after)

		// Everything allocated while handling the reply: the frame
		// buffer grows with the bytes that arrived, never with what the
		// size header claims; kmsg's structs are bounded by the input.
		if grew := after.TotalAlloc - before.TotalAlloc; grew > fuzzMaxResponseBytes {
			t.Fatalf("allocated %d bytes for a %d-byte reply", grew, len(reply))
		}
		if err != nil {
			if !c.closed {
				t.Fatalf("error %v left the connection open", err)
			}
			if errors.Is(err, ErrSourceConnClosed) {
				t.Fatalf("first roundTrip reported a closed connection: %v", err)
			}
			return
		}
		if c.closed {
			t.Fatal("success closed the connection")
		}
		if cap(c.rbuf) > fuzzMaxResponseBytes {
			t.Fatalf("read buffer cap %d above the cap", cap(c.rbuf))
		}
		if len(reply) < 8 {
			t.Fatalf("decoded a %d-byte reply", len(reply))
		}
		if size := int32(binary.BigEndian.Uint32(reply)); size < 4 || int(size) > len(reply)-4 {
			t.Fatalf("decoded a frame of size %d from %d bytes", size, len(reply))
		}
		if resp.GetVersion() != req.Version {
			t.Fatalf("response version %d, want %d", resp.GetVersion(), req.Version)
		}
	})
}
