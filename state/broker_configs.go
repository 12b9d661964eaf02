package state

import (
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// BrokerConfigs returns the dynamic broker configs (those set with
// IncrementalAlterConfigs on the BROKER resource). The map is never nil.
func (s *Store) BrokerConfigs() (map[string]string, error) {
	var m map[string]string
	err := s.view(func(txn *badger.Txn) error {
		m = make(map[string]string)
		return scanPrefix(txn, keyBrokerConfigPrefix, func(name string, v []byte) error {
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

// SetBrokerConfigs sets the configs in set and deletes those in del, in one
// transaction: either all changes persist or none. Deleting an unset config
// is a no-op. An empty config name, or a name both set and deleted, is
// refused, as Kafka refuses duplicate config names in one alteration.
func (s *Store) SetBrokerConfigs(set map[string]string, del []string) error {
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
	return s.update(func(txn *badger.Txn) error {
		for _, name := range del {
			if err := txn.Delete(brokerConfigKey(name)); err != nil {
				return err
			}
		}
		for name, v := range set {
			if err := txn.Set(brokerConfigKey(name), appendBrokerConfig(nil, v)); err != nil {
				return err
			}
		}
		return nil
	})
}
