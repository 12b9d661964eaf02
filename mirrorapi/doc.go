// Package mirrorapi holds the wire schemas of the cluster-mirror admin RPCs
// (KIP-1279) and their error codes, with kmsg-style encoders.
//
// kmirror is administered over the Kafka protocol (DESIGN.md decision 7):
// the mirror RPCs use the reference prototype's API keys and field layouts
// (SPEC.md section 2; schemas of aiven/inkless commit c9410596, plus
// RecoverMirrorTopics from its later tree), so `kmirror mirrors
// --bootstrap-server` works like kafka-cluster-mirrors.sh, against kmirror
// or against the prototype. This package is the one place those keys and
// layouts live; the broker, the control plane and the CLI all use it.
//
// Every request type implements kmsg.Request (and kmsg.AdminRequest), every
// response kmsg.Response, so:
//
//   - the broker decodes a mirror RPC like any kmsg request: RequestForKey,
//     SetVersion, ReadFrom; and answers with ResponseKind and AppendTo;
//   - a franz-go client sends one with kgo.Client.Request or RequestWith,
//     once built with kgo.MaxVersions(WithMirrorKeys(nil)): kgo's default
//     version table lacks these keys and kgo refuses to send them. kgo
//     sends admin requests to the controller id of the Metadata response,
//     which a kmirror node sets to itself.
//
// AppendTo appends only the body (the caller writes the header). ReadFrom
// decodes a body and returns an error, never panics, on truncation, a bad
// length or trailing bytes; it checks every array count against the bytes
// left before allocating (ErrTruncated, ErrMalformed, ErrUnsupportedVersion).
// The encoders are not on a hot path and allocate freely.
//
// # API keys
//
//	key  name                    answered by
//	 94  CreateClusterMirror     controller (forwarded by a broker)
//	 95  StartMirrorTopics       controller (forwarded)
//	 96  StopMirrorTopics        controller (forwarded)
//	 98  ListClusterMirrors      any broker
//	 99  DescribeClusterMirrors  every broker, for the partitions it leads
//	102  PauseMirrorTopics       controller (forwarded)
//	103  ResumeMirrorTopics      controller (forwarded)
//	104  DeleteClusterMirror     controller (forwarded)
//	107  RecoverMirrorTopics     any broker
//
//	105  BumpLeaderEpochs        controller, on its CONTROLLER listener (inter-node)
//
// Keys 100, 101 and 106 (ReadMirrorStates, WriteMirrorStates,
// ReadMirrorOffsets) are inter-broker RPCs of the prototype that kmirror
// does not need (mirror state lives in the metadata log), so they are not
// here; 97 is unused.
// Key 94 is also Apache Kafka's UnregisterController (a controller-only API):
// dispatch on this package before kmsg.
//
// # Encoding
//
// Every RPC has exactly one version, 0, and it is flexible (KIP-482):
//
//	string         uvarint(len+1), bytes            ("" is 0x01)
//	nullable str   uvarint(len+1), bytes; null 0x00
//	array          uvarint(count+1), elements       (empty is 0x01; null is
//	                                                 rejected: no field here
//	                                                 is a nullable array)
//	uuid           16 bytes
//	intN, bool     big endian, fixed width
//	tagged fields  uvarint(n), then n x {uvarint tag, uvarint size, value},
//	               ascending tags; after every struct, top level included
//
// A tagged field at its default (nil, empty) is not written. ReadFrom skips
// unknown tags, and AppendTo does not write them back.
//
// # Layouts
//
// Fields in wire order; "{...}" is an array of structs, "tag N" a tagged
// field of the enclosing struct.
//
//	94 CreateClusterMirror
//	  req   MirrorName string, Config {Name string, Value nullable}
//	  resp  ThrottleTimeMs int32, ErrorCode int16, ErrorMessage nullable
//	95 StartMirrorTopics
//	  req   MirrorName string,
//	        Topics {TopicId uuid, TopicName string, NumPartitions int32},
//	        StateValidationOffset int64 (-1),
//	        tag 0 IncludePatterns []string, tag 1 ExcludePatterns []string
//	  resp  ThrottleTimeMs int32, ErrorCode int16, ErrorMessage nullable,
//	        Topics {Name string, ErrorCode int16, ErrorMessage nullable}
//	96 StopMirrorTopics
//	  req   MirrorName string, Topics {TopicName string},
//	        StateValidationOffset int64 (-1), tag 0 Patterns []string
//	  resp  as 95, each topic with the kmirror additions
//	        tag 0 FinalSync int8, tag 1 FinalSyncMessage nullable,
//	        tag 2 Partitions {PartitionIndex int32, SourceOffset int64,
//	                          SourceOffsetMillis int64,
//	                          DestinationOffset int64, Lag int64}
//	98 ListClusterMirrors
//	  req   IncludeTopicNames bool
//	  resp  ThrottleTimeMs int32, ErrorCode int16, ErrorMessage nullable,
//	        Mirrors {MirrorName string, SourceBootstrap string,
//	                 SourceClusterId string, TopicCount int32,
//	                 TopicNames []string}
//	99 DescribeClusterMirrors
//	  req   MirrorNames []string, IncludeAuthorizedOperations bool,
//	        tag 0 ClusterId nullable,
//	        tag 1 LastMirrorEpochLookups {TopicId uuid, Partitions []int32}
//	  resp  ThrottleTimeMs int32, ErrorCode int16, ErrorMessage nullable,
//	        Mirrors {ErrorCode int16, MirrorName string,
//	                 AuthorizedOperations int32,
//	                 Topics {TopicName string,
//	                         Partitions {PartitionIndex int32,
//	                                     SourceOffset int64,
//	                                     DestinationOffset int64, Lag int64,
//	                                     StateValue string,
//	                                     RetryAttempt int16,
//	                                     ErrorMessage nullable}},
//	                 tag 0 ErrorMessage nullable (kmirror addition),
//	                 tag 1 LastGroupSyncMillis int64 (kmirror addition)},
//	        tag 0 LookupResults {TopicId uuid,
//	                             Partitions {PartitionIndex int32,
//	                                         LastMirrorEpoch int32}}
//	102 PauseMirrorTopics, 103 ResumeMirrorTopics
//	  req   MirrorName string, Topics {TopicName string},
//	        StateValidationOffset int64 (-1)
//	  resp  as 95
//	104 DeleteClusterMirror
//	  req   MirrorName string, StateValidationOffset int64 (-1)
//	  resp  as 94
//	107 RecoverMirrorTopics
//	  req   MirrorName string, Topics {TopicName string}
//	  resp  as 95
//
// Where the Go types and the prototype's schema differ, the wire follows the
// schema: ListClusterMirrorsResponseMirror.SourceClusterID (nil is sent as
// the empty string, which decodes as nil) and
// DescribeClusterMirrorsResponsePartition.RetryAttempt (an int32 in Go, an
// int16 on the wire, clamped).
//
// # Error codes
//
// The mirror codes are the prototype's (SPEC.md section 2), assigned
// before Apache Kafka released codes of its own in that range. Against the
// codes the released clients know (Errors.values() of kafka-clients
// 4.4.0 and 3.9.2; 4.4.0 ends at 136, 3.9.2 at 127):
//
//	code     mirror meaning                   Kafka 4.4.0                                 3.9.2
//	134      READ_ONLY_TOPIC (not sent)       GROUP_DELETION_FAILED                       unknown
//	135      unused                           STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED  unknown
//	136      CLUSTER_MIRROR_ALREADY_EXISTS    CONTROLLER_ID_NOT_REGISTERED                unknown
//	137-146  the other mirror codes           unassigned                                  unknown
//
// franz-go's kerr follows Kafka 4.4 (it names 134-136 as above). So:
//
//   - a write to a mirror topic answers POLICY_VIOLATION (44), not 134:
//     every released client knows 44 and does not retry it (the broker's
//     errReadOnlyTopic says why this code);
//   - the mirror RPCs keep 136-146, since no released Kafka client sends
//     them: only tools that speak KIP-1279 read their answers, and those
//     decode by this package's table. `kmirror mirrors` turns every code
//     through ErrorName, which prefers the mirror names, so an existing
//     mirror prints CLUSTER_MIRROR_ALREADY_EXISTS, never Kafka 4.4's
//     CONTROLLER_ID_NOT_REGISTERED. A tool that decoded a mirror RPC answer
//     with Kafka 4.4's Errors (or kerr) would misname 136. When Apache Kafka
//     releases KIP-1279 with its own codes, a new version of each RPC will
//     carry them (see below); TestErrorCodesAgainstKafka44 pins this table.
//
// These layouts, keys and error codes are part of the wire format: changing
// one breaks kafka-cluster-mirrors.sh and every deployed kmirror. A change
// needs a new version of the RPC, as in Kafka.
package mirrorapi
