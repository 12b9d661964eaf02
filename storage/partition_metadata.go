package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kmirror/kmirror/internal/topicid"
	"github.com/kmirror/kmirror/internal/vfs"
)

// Every partition directory holds a partition.metadata naming the topic id
// of the partition, in Apache Kafka's format (PartitionMetadataFile):
//
//	version: 0
//	topic_id: <the id as Kafka's Uuid.toString writes it>
//
// These lines are part of the on-disk format. WHY: the state store that
// names topics and their ids lives apart from the logs; when it is lost,
// `kmirror storage rebuild` reads the ids back from here, so clients and
// mirrors that know a topic by its id still find it.

// PartitionMetadataFile is the file's name inside a partition directory.
const PartitionMetadataFile = "partition.metadata"

// ErrPartitionMetadata marks a partition.metadata that does not parse.
var ErrPartitionMetadata = errors.New("storage: partition.metadata")

// ParsePartitionMetadata reads the body of a partition.metadata and
// returns its topic id. It accepts exactly what Kafka writes (one trailing
// newline optional, "\r\n" line ends too) and refuses any other version, a
// zero id and trailing lines.
func ParsePartitionMetadata(body []byte) ([16]byte, error) {
	var id [16]byte
	body = bytes.TrimSuffix(body, []byte("\n"))
	body = bytes.TrimSuffix(body, []byte("\r"))
	lines := bytes.Split(body, []byte("\n"))
	if len(lines) != 2 {
		return id, fmt.Errorf("%w: want 2 lines, got %d", ErrPartitionMetadata, len(lines))
	}
	field := func(line []byte, key string) (string, error) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		v, ok := bytes.CutPrefix(line, []byte(key+": "))
		if !ok {
			return "", fmt.Errorf("%w: want %q, got %q", ErrPartitionMetadata, key+": ...", line)
		}
		return string(bytes.TrimSpace(v)), nil
	}
	version, err := field(lines[0], "version")
	if err != nil {
		return id, err
	}
	if version != "0" {
		return id, fmt.Errorf("%w: unknown version %q", ErrPartitionMetadata, version)
	}
	s, err := field(lines[1], "topic_id")
	if err != nil {
		return id, err
	}
	if id, err = topicid.Parse(s); err != nil {
		return id, fmt.Errorf("%w: %w", ErrPartitionMetadata, err)
	}
	if id == ([16]byte{}) {
		return id, fmt.Errorf("%w: the zero topic id", ErrPartitionMetadata)
	}
	return id, nil
}

// AppendPartitionMetadata appends the body of a partition.metadata naming
// topic id to dst.
func AppendPartitionMetadata(dst []byte, id [16]byte) []byte {
	dst = append(dst, "version: 0\ntopic_id: "...)
	dst = append(dst, topicid.String(id)...)
	return append(dst, '\n')
}

// ReadPartitionMetadata reads dir's partition.metadata. found is false when
// there is none; a file that does not parse is an error naming it.
func ReadPartitionMetadata(dir string) (id [16]byte, found bool, err error) {
	return readPartitionMetadata(vfs.Default, dir)
}

func readPartitionMetadata(fsys vfs.FS, dir string) (id [16]byte, found bool, err error) {
	path := filepath.Join(dir, PartitionMetadataFile)
	body, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, os.ErrNotExist) {
		return id, false, nil
	}
	if err != nil {
		return id, false, err
	}
	if id, err = ParsePartitionMetadata(body); err != nil {
		return id, true, fmt.Errorf("%s: %w", path, err)
	}
	return id, true, nil
}

// SetTopicID makes the log's partition.metadata name topic id, writing it
// (atomically) when it is missing or names another id. Another id is
// replaced only while the log holds no record: an empty directory left
// by a topic creation that did not complete. A log with records under
// another id is another topic's data and is refused.
func (l *Log) SetTopicID(id [16]byte) error {
	path := filepath.Join(l.dir, PartitionMetadataFile)
	old, found, err := readPartitionMetadata(l.fs, l.dir)
	switch {
	case err != nil && !errors.Is(err, ErrPartitionMetadata):
		return err
	case err == nil && found && old == id:
		return nil
	case found && l.LogEndOffset() > 0:
		what := "names topic id " + topicid.String(old)
		if err != nil {
			what = "does not parse (" + err.Error() + ")"
		}
		return fmt.Errorf("%s %s, but this partition belongs to topic id %s and its log holds records: it is "+
			"another topic's data; move the directory aside", path, what, topicid.String(id))
	}
	return vfs.WriteFileAtomic(l.fs, l.dir, path, AppendPartitionMetadata(nil, id))
}
