package state

import (
	"encoding/hex"
	"fmt"
	"strconv"
)

// BrokerConfigs returns the cluster-wide default dynamic broker configs
// (those set with IncrementalAlterConfigs on the BROKER resource ""). The
// map is never nil.
func (s *Store) BrokerConfigs() (map[string]string, error) {
	return s.configsAt(keyBrokerConfigPrefix)
}

// SetBrokerConfigs sets the cluster-wide default configs in set and
// deletes those in del, in one transaction: either all changes persist or
// none. Deleting an unset config is a no-op. An empty config name, or a
// name both set and deleted, is refused, as Kafka refuses duplicate config
// names in one alteration.
func (s *Store) SetBrokerConfigs(set map[string]string, del []string) error {
	return s.setConfigsAt(keyBrokerConfigPrefix, set, del)
}

// NodeConfigs returns the per-broker dynamic configs of node (the BROKER
// resource named by its id). They are kept apart from the cluster default
// because they win over it, as in Kafka. The map is never nil.
func (s *Store) NodeConfigs(node int32) (map[string]string, error) {
	return s.configsAt(nodeConfigPrefix(node))
}

// SetNodeConfigs is SetBrokerConfigs for node's per-broker configs.
func (s *Store) SetNodeConfigs(node int32, set map[string]string, del []string) error {
	return s.setConfigsAt(nodeConfigPrefix(node), set, del)
}

// nodeConfigPrefix is the key prefix of node's configs. The '/' after the
// id keeps node 1's scan off node 10's keys.
func nodeConfigPrefix(node int32) string {
	return keyNodeConfigPrefix + strconv.FormatInt(int64(node), 10) + "/"
}

func (s *Store) configsAt(prefix string) (map[string]string, error) {
	var m map[string]string
	err := s.view(func(txn tx) error {
		m = make(map[string]string)
		return scanPrefix(txn, prefix, func(name string, v []byte) error {
			val, err := decodeBrokerConfig(v)
			if err != nil {
				return err
			}
			m[name] = val
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (s *Store) setConfigsAt(prefix string, set map[string]string, del []string) error {
	for name := range set {
		if name == "" {
			return fmt.Errorf("state: set broker configs: empty config name")
		}
	}
	for _, name := range del {
		if name == "" {
			return fmt.Errorf("state: set broker configs: empty config name")
		}
		if _, ok := set[name]; ok {
			return fmt.Errorf("state: set broker configs: config %q both set and deleted", name)
		}
	}
	return s.update(func(txn tx) error {
		for _, name := range del {
			if err := txn.Delete([]byte(prefix + name)); err != nil {
				return err
			}
		}
		for name, v := range set {
			if err := txn.Set([]byte(prefix+name), appendBrokerConfig(nil, v)); err != nil {
				return err
			}
		}
		return nil
	})
}

// GroupConfigs returns the dynamic configs of group (the GROUP resource,
// kafka-configs --entity-type groups), which a group may have before it
// exists. The map is never nil.
func (s *Store) GroupConfigs(group string) (map[string]string, error) {
	return s.configsAt(groupConfigPrefix(group))
}

// SetGroupConfigs is SetBrokerConfigs for group's configs.
func (s *Store) SetGroupConfigs(group string, set map[string]string, del []string) error {
	if group == "" || len(group) > maxGroupNameLen {
		return fmt.Errorf("state: set group configs: a group name of %d bytes", len(group))
	}
	return s.setConfigsAt(groupConfigPrefix(group), set, del)
}

// groupConfigPrefix is the key prefix of group's configs: the name in hex,
// then '/', so that no group's scan reaches another's keys (a group name
// may hold any byte, '/' too).
func groupConfigPrefix(group string) string {
	return string(hex.AppendEncode([]byte(keyGroupConfigPrefix), []byte(group))) + "/"
}
