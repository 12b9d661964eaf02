package bench

// LoadValues returns n record values of exactly size bytes each, for load
// generators that produce through a real client (the broker benchmarks,
// later `kmirror bench`). Each value is newline-separated JSON events, the
// values of the GenRecords stream in order, cut at size bytes: every value
// differs from the others, and a batch of them compresses like a real JSON
// topic (about 3x with lz4 in 1 MiB batches) rather than like repeated bytes. The result is
// the same on every call.
//
// A caller cycles through the values. Keep n * size well above 64 KiB, the
// lz4 window, so that no batch compresses a value against an earlier copy
// of itself (4096 values of 1 KiB are 4 MiB).
//
// It formats every event with fmt, about a microsecond each, so it belongs
// in setup (about 25 ms for 4096 values of 1 KiB).
func LoadValues(n, size int) [][]byte {
	g := newRecordGen()
	buf := make([]byte, n*size) // one allocation backs every value
	out := make([][]byte, n)
	i := 0
	for v := range out {
		val := buf[v*size : v*size : (v+1)*size]
		for len(val) < size {
			r := g.next(i)
			i++
			val = append(val, r.Value[:min(len(r.Value), size-len(val))]...)
			if len(val) < size {
				val = append(val, '\n')
			}
		}
		out[v] = val
	}
	return out
}
