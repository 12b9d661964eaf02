package mirrorapi

import (
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Kafka error codes added by cluster mirroring (SPEC.md section 2; 135 is
// unused). These constants are part of the wire format.
//
// 134 and 136 collide with codes Apache Kafka 4.4 released for other
// errors (GROUP_DELETION_FAILED, CONTROLLER_ID_NOT_REGISTERED; see "Error
// codes" in the package doc). In a mirror RPC's answer they mean the
// mirror codes: decode them with ErrorName / ErrorForCode from this
// package, which prefer the mirror table, never with kerr.
const (
	// ErrReadOnlyTopic is the prototype's READ_ONLY_TOPIC. kmirror never
	// sends it: released clients misread 134, so writes to a mirror topic
	// answer POLICY_VIOLATION (44) with a message naming the mirror (the
	// broker's errReadOnlyTopic). It stays here to name a prototype's
	// answer.
	ErrReadOnlyTopic                    int16 = 134
	ErrClusterMirrorAlreadyExists       int16 = 136
	ErrUnknownClusterMirror             int16 = 137
	ErrTopicAlreadyInClusterMirror      int16 = 138
	ErrTopicNotInClusterMirror          int16 = 139
	ErrMirrorTopicAlreadyPaused         int16 = 140
	ErrMirrorTopicNotPaused             int16 = 141
	ErrMirrorTopicBeingStopped          int16 = 142
	ErrClusterMirrorNotEmpty            int16 = 143
	ErrClusterMirrorAuthorizationFailed int16 = 144
	ErrInvalidClusterMirrorStates       int16 = 145
	ErrMirrorTopicNotStopped            int16 = 146
)

// Error is a mirror error code as a Go error, with its Kafka name
// ("UNKNOWN_CLUSTER_MIRROR") and a one-line description. ErrorForCode returns
// the same *Error for the same code; errors.Is also matches any *Error with
// an equal Code.
type Error struct {
	Code    int16
	Name    string
	Message string
}

func (e *Error) Error() string { return e.Name + ": " + e.Message }

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t != nil && t.Code == e.Code
}

// mirrorErrors is the table of mirror codes, in code order.
var mirrorErrors = [...]Error{
	{ErrReadOnlyTopic, "READ_ONLY_TOPIC", "The topic is a mirror topic and is read-only until it is stopped."},
	{ErrClusterMirrorAlreadyExists, "CLUSTER_MIRROR_ALREADY_EXISTS", "A cluster mirror with this name already exists."},
	{ErrUnknownClusterMirror, "UNKNOWN_CLUSTER_MIRROR", "No cluster mirror with this name exists."},
	{ErrTopicAlreadyInClusterMirror, "TOPIC_ALREADY_IN_CLUSTER_MIRROR", "The topic already belongs to a cluster mirror."},
	{ErrTopicNotInClusterMirror, "TOPIC_NOT_IN_CLUSTER_MIRROR", "The topic is not part of this cluster mirror."},
	{ErrMirrorTopicAlreadyPaused, "MIRROR_TOPIC_ALREADY_PAUSED", "The mirror topic is paused."},
	{ErrMirrorTopicNotPaused, "MIRROR_TOPIC_NOT_PAUSED", "The mirror topic is not paused."},
	{ErrMirrorTopicBeingStopped, "MIRROR_TOPIC_BEING_STOPPED", "The mirror topic is stopping or stopped."},
	{ErrClusterMirrorNotEmpty, "CLUSTER_MIRROR_NOT_EMPTY", "The cluster mirror still has mirroring or paused topics."},
	{ErrClusterMirrorAuthorizationFailed, "CLUSTER_MIRROR_AUTHORIZATION_FAILED", "Not authorized to access the cluster mirror."},
	{ErrInvalidClusterMirrorStates, "INVALID_CLUSTER_MIRROR_STATES", "The mirror partition states do not allow this operation, or changed while it was checked."},
	{ErrMirrorTopicNotStopped, "MIRROR_TOPIC_NOT_STOPPED", "The mirror topic is not stopped."},
}

// mirrorError returns the table entry of a mirror code, or nil.
func mirrorError(code int16) *Error {
	for i := range mirrorErrors {
		if mirrorErrors[i].Code == code {
			return &mirrorErrors[i]
		}
	}
	return nil
}

// kafkaError returns kerr's error for a code kerr knows; nil for 0 and for
// codes kerr does not know (kerr.ErrorForCode answers UNKNOWN_SERVER_ERROR
// for those, which would hide the code).
func kafkaError(code int16) *kerr.Error {
	if code == 0 {
		return nil
	}
	ke := kerr.TypedErrorForCode(code)
	if ke == nil || ke.Code != code {
		return nil
	}
	return ke
}

// ErrorName returns the Kafka name of a code: the mirror names for the
// mirror codes, "NONE" for 0, kerr's name for the other codes it knows, else
// "UNKNOWN_<code>".
func ErrorName(code int16) string {
	if e := mirrorError(code); e != nil {
		return e.Name
	}
	if code == 0 {
		return "NONE"
	}
	if ke := kafkaError(code); ke != nil {
		return ke.Message
	}
	return "UNKNOWN_" + strconv.Itoa(int(code))
}

// ErrorMessage returns a one-line description of a code (kerr's for the
// non-mirror codes it knows).
func ErrorMessage(code int16) string {
	if e := mirrorError(code); e != nil {
		return e.Message
	}
	if code == 0 {
		return "No error."
	}
	if ke := kafkaError(code); ke != nil {
		return ke.Description
	}
	return fmt.Sprintf("Unknown error code %d.", code)
}

// ErrorForCode returns nil for 0, an *Error for a mirror code, kerr's error
// for another code kerr knows, and for a code neither knows an *Error named
// "UNKNOWN_<code>" (unlike kerr, which answers UNKNOWN_SERVER_ERROR and
// loses the code).
func ErrorForCode(code int16) error {
	if code == 0 {
		return nil
	}
	if e := mirrorError(code); e != nil {
		return e
	}
	if ke := kafkaError(code); ke != nil {
		return ke
	}
	return &Error{Code: code, Name: ErrorName(code), Message: ErrorMessage(code)}
}
