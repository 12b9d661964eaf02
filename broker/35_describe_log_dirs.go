package broker

import (
	"cmp"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/kmirror/kmirror/partition"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeLogDirs: v1-4
//
// Behavior:
// One entry per configured log directory (log.dirs, duplicates once, as
// absolute paths as Kafka reports them), each with the partitions stored
// in it: the requested ones, or all when Topics is null. A partition's size
// is the bytes of its segment files. A directory whose file system cannot
// be read answers KAFKA_STORAGE_ERROR and no partitions, as Kafka answers
// an offline directory.
//
// One node differs from Kafka: nothing moves between directories
// (AlterReplicaLogDirs), so OffsetLag is 0 and IsFuture false.
//
// Authorization: DESCRIBE on the cluster, else no directory is listed and
// (v3+) the top-level error is CLUSTER_AUTHORIZATION_FAILED.
//
// Version notes:
// v1 is the floor (Kafka 4.0); v2 flexible; v3 top-level error code; v4
// total and usable bytes of each directory's file system.
func init() { regKey(35, 1, 4, (*Broker).handleDescribeLogDirs) }

func (b *Broker) handleDescribeLogDirs(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if az := b.authz(r); !az.cluster(aclOperationDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}

	var want map[string]map[int32]bool // nil: every partition
	if req.Topics != nil {
		want = make(map[string]map[int32]bool, len(req.Topics))
		for _, rt := range req.Topics {
			if want[rt.Topic] == nil {
				want[rt.Topic] = make(map[int32]bool, len(rt.Partitions))
			}
			for _, p := range rt.Partitions {
				want[rt.Topic][p] = true
			}
		}
	}

	// Partitions by the absolute directory holding them, sorted by topic
	// and partition so the answer is stable.
	byDir := make(map[string][]*partition.Partition)
	for _, p := range b.partitions.Partitions() {
		if want != nil && !want[p.Topic().Name()][p.Index()] {
			continue
		}
		dir, err := filepath.Abs(filepath.Dir(p.Log().Dir()))
		if err != nil {
			continue // Abs fails only when the working directory is gone
		}
		byDir[dir] = append(byDir[dir], p)
	}

	seen := make(map[string]bool, len(b.cfg.LogDirs))
	for _, d := range b.cfg.LogDirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			abs = filepath.Clean(d)
		}
		if seen[abs] {
			continue
		}
		seen[abs] = true
		rd := kmsg.NewDescribeLogDirsResponseDir()
		rd.Dir = abs
		var fs syscall.Statfs_t
		if err := syscall.Statfs(abs, &fs); err != nil {
			b.log.Warn("describing a log directory failed", "dir", abs, "err", err)
			rd.ErrorCode = kerr.KafkaStorageError.Code
			resp.Dirs = append(resp.Dirs, rd)
			continue
		}
		// Bavail, not Bfree: Java's getUsableSpace leaves out the blocks
		// reserved for root.
		rd.TotalBytes = int64(fs.Blocks) * int64(fs.Bsize)
		rd.UsableBytes = int64(fs.Bavail) * int64(fs.Bsize)
		rd.Topics = logDirTopics(byDir[abs])
		resp.Dirs = append(resp.Dirs, rd)
	}
	return resp, nil
}

// logDirTopics groups one directory's partitions by topic.
func logDirTopics(parts []*partition.Partition) []kmsg.DescribeLogDirsResponseDirTopic {
	slices.SortFunc(parts, func(a, b *partition.Partition) int {
		return cmp.Or(cmp.Compare(a.Topic().Name(), b.Topic().Name()), cmp.Compare(a.Index(), b.Index()))
	})
	var out []kmsg.DescribeLogDirsResponseDirTopic
	for _, p := range parts {
		if len(out) == 0 || out[len(out)-1].Topic != p.Topic().Name() {
			rt := kmsg.NewDescribeLogDirsResponseDirTopic()
			rt.Topic = p.Topic().Name()
			out = append(out, rt)
		}
		rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		rp.Partition = p.Index()
		rp.Size = p.Log().Size()
		rt := &out[len(out)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return out
}
