package group

import (
	"fmt"
	"testing"
)

// FuzzAssignors builds groups from the fuzzer's bytes (members, their
// subscriptions and current assignments, partition counts) and checks
// every assignor's guarantees, and the uniform one's balance, on them.
func FuzzAssignors(f *testing.F) {
	f.Add([]byte{3, 4, 7, 1, 2, 3, 0xff, 0x10, 0x22})
	f.Add([]byte{8, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		next := func() byte {
			if len(data) == 0 {
				return 0
			}
			b := data[0]
			data = data[1:]
			return b
		}
		spec := AssignSpec{Partitions: map[TopicID]int32{}, Members: map[string]AssignMember{}}
		nTopics := int(next()%4) + 1
		for i := range nTopics {
			spec.Partitions[topicID(byte(i))] = int32(next() % 12)
		}
		nMembers := int(next()%6) + 1
		for i := range nMembers {
			var m AssignMember
			subs := next()
			for j := range nTopics {
				if subs&(1<<j) != 0 {
					m.Topics = append(m.Topics, topicID(byte(j)))
				}
			}
			m.Current = Assignment{}
			for range int(next() % 5) {
				tp := next()
				topic := topicID(tp % byte(nTopics))
				m.Current[topic] = append(m.Current[topic], int32(tp>>2)%14-1)
			}
			spec.Members[fmt.Sprintf("m%d", i)] = m
		}
		for _, name := range DefaultAssignors {
			got := Assignors[name].Assign(spec)
			checkAssignment(t, spec, got)
			if name == "uniform" {
				checkUniformBalance(t, spec, got)
			}
		}
	})
}
