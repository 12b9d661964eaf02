package verify

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kmirror/kmirror/batch"
)

func TestScan(t *testing.T) {
	t.Parallel()
	b0, b10, b20 := testBatch(0, 10, 'a', 50), testBatch(10, 10, 'b', 50), testBatch(20, 10, 'c', 50)
	all := append(append(append([]byte{}, b0...), b10...), b20...)
	bad := append([]byte{}, all...)
	bad[len(b0)+len(b10)-1] ^= 1 // the payload of the batch at 10
	tests := []struct {
		name     string
		records  []byte
		from, to int64
		want     string
		next     int64
		done     bool
	}{
		{"all", all, 0, 100, "[0-9 10-19 20-29]", 30, false},
		{"from inside a batch", all, 15, 100, "[10-19 20-29]", 30, false},
		{"up to the window end", all, 0, 20, "[0-9 10-19]", 20, true},
		{"partial tail", all[:len(all)-3], 0, 100, "[0-9 10-19]", 20, false},
		{"damaged batch", bad, 0, 100, "[0-9 10-19! 20-29]", 30, false},
		{"empty", nil, 7, 100, "[]", 7, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hs, next, done, err := scan(nil, tt.records, tt.from, tt.to)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, h := range hs {
				s := fmt.Sprintf("%d-%d", h.base, h.last)
				if h.damaged {
					s += "!"
				}
				got = append(got, s)
			}
			if fmt.Sprint(got) != tt.want && !(tt.want == "[]" && got == nil) || next != tt.next || done != tt.done {
				t.Errorf("%v next %d done %v, want %s %d %v", got, next, done, tt.want, tt.next, tt.done)
			}
		})
	}
	t.Run("bad magic", func(t *testing.T) {
		t.Parallel()
		broken := append([]byte{}, all...)
		broken[len(b0)+16] = 7
		hs, next, _, err := scan(nil, broken, 0, 100)
		if !errors.Is(err, batch.ErrUnknownMagic) || len(hs) != 1 || next != 10 {
			t.Fatalf("%d headers, next %d, err %v; want the first, 10, ErrUnknownMagic", len(hs), next, err)
		}
	})
}
