package mirrorapi

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// kafka44Codes are the codes from 128 up of Apache Kafka 4.4.0's
// org.apache.kafka.common.protocol.Errors, as Errors.values() prints them
// from kafka-clients-4.4.0.jar (code, name); the highest is 136. Kafka
// 3.9.2's Errors ends at 127 (VOTER_NOT_FOUND), below every mirror code.
var kafka44Codes = map[int16]string{
	128: "INVALID_REGULAR_EXPRESSION",
	129: "REBOOTSTRAP_REQUIRED",
	130: "STREAMS_INVALID_TOPOLOGY",
	131: "STREAMS_INVALID_TOPOLOGY_EPOCH",
	132: "STREAMS_TOPOLOGY_FENCED",
	133: "SHARE_SESSION_LIMIT_REACHED",
	134: "GROUP_DELETION_FAILED",
	135: "STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED",
	136: "CONTROLLER_ID_NOT_REGISTERED",
}

// The mirror codes that Kafka 4.4 released for other errors are exactly
// the ones the package doc's table lists, kerr names them as Kafka does
// (so a kerr decoder would misname a mirror answer), and this package's
// decoders still answer with the mirror names, which is what `kmirror
// mirrors` prints. A new Kafka release that takes more of 137-146 fails
// here once its codes are added to kafka44Codes (and kerr learns them).
func TestErrorCodesAgainstKafka44(t *testing.T) {
	t.Parallel()
	want := map[int16]string{
		ErrReadOnlyTopic:              "GROUP_DELETION_FAILED",
		ErrClusterMirrorAlreadyExists: "CONTROLLER_ID_NOT_REGISTERED",
	}
	got := map[int16]string{}
	for _, e := range mirrorErrors {
		if name, ok := kafka44Codes[e.Code]; ok {
			got[e.Code] = name
		}
		if ke := kerr.TypedErrorForCode(e.Code); ke != nil && ke.Code == e.Code {
			if want[e.Code] == "" {
				t.Errorf("kerr knows %d as %s, a mirror code (%s) the table calls unassigned", e.Code, ke.Message, e.Name)
			} else if ke.Message != want[e.Code] {
				t.Errorf("kerr names %d %s, Kafka 4.4 %s", e.Code, ke.Message, want[e.Code])
			}
		}
		if name := ErrorName(e.Code); name != e.Name {
			t.Errorf("ErrorName(%d) = %s, want the mirror name %s", e.Code, name, e.Name)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("mirror codes Kafka 4.4 also uses: %v, want %v", got, want)
	}
	for code, name := range want {
		if got[code] != name {
			t.Errorf("code %d: Kafka 4.4 has %q, want %q", code, got[code], name)
		}
	}
	// 135 is no mirror code, so it decodes as Kafka's.
	if name := ErrorName(135); name != kafka44Codes[135] {
		t.Errorf("ErrorName(135) = %s, want Kafka's %s", name, kafka44Codes[135])
	}
	// What a mirror topic's writes answer instead of 134.
	if name := ErrorName(kerr.PolicyViolation.Code); name != "POLICY_VIOLATION" || kerr.IsRetriable(kerr.PolicyViolation) {
		t.Errorf("ErrorName(44) = %s (retriable %v), want POLICY_VIOLATION, not retriable", name, kerr.IsRetriable(kerr.PolicyViolation))
	}
}
