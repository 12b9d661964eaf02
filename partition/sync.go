package partition

import (
	"errors"
	"fmt"
	"maps"

	"github.com/kmirror/kmirror/state"
)

// Sync makes the hosted topics those the store registers, after the
// metadata log applied another node's change to it (a topic created,
// deleted, grown, reconfigured or handed to a mirror on the controller):
// missing topics are opened, topics gone (or re-created under another id)
// are removed, partition counts grow, configs and mirror owners follow.
// On the node whose handler made the change, the change is already here
// (Create, Delete, Grow, SetConfigs and SetMirror hold the registry's
// lock across their store write, so Sync never sees it half made) and
// Sync finds nothing to do. Failures are returned together; what could
// be done is done, and the next Sync retries the rest.
func (m *Manager) Sync() error {
	gone, err := m.syncLocked()
	if len(gone) == 0 {
		return err
	}
	errs := []error{err}
	for _, t := range gone {
		if _, err := m.remove(t, false); err != nil {
			errs = append(errs, err)
		}
	}
	// A topic re-created under a new id opens once its old incarnation
	// is gone.
	_, err = m.syncLocked()
	return errors.Join(append(errs, err)...)
}

// syncLocked opens, grows and reconfigures what the store says, and
// returns the hosted topics the store no longer names (or names under
// another id), which remove takes off after checking again. The store is
// read under mu: a Create, Grow or SetConfigs holds mu across its store
// write, so the store read here and the registry agree.
func (m *Manager) syncLocked() (gone []*Topic, _ error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	stored, err := m.cfg.Store.Topics()
	if err != nil {
		return nil, fmt.Errorf("partition: reading the topics to sync: %w", err)
	}
	want := make(map[string]state.Topic, len(stored))
	for _, st := range stored {
		want[st.Name] = st
	}
	for _, t := range m.topics {
		if st, ok := want[t.name]; !ok || st.ID != t.id {
			gone = append(gone, t)
		}
	}
	var errs []error
	changed := false
	for _, st := range stored {
		t := m.topics[st.Name]
		if t == nil {
			nt, err := m.openTopic(st)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			m.topics[nt.name], m.topicsByID[nt.id] = nt, nt
			changed = true
			m.log.Info("topic opened from the metadata log", "topic", st.Name, "partitions", st.Partitions)
			continue
		}
		if t.id != st.ID {
			continue // another incarnation: removed first, then opened
		}
		if n := st.Partitions; n > int32(len(t.Partitions())) {
			if err := m.addPartitions(t, n); err != nil {
				errs = append(errs, err)
			} else {
				changed = true
			}
		}
		if configs := st.Configs; !maps.Equal(configs, t.configs) {
			if configs == nil {
				configs = map[string]string{}
			}
			if err := m.applyConfigsLocked(t, configs); err != nil {
				errs = append(errs, err)
			}
		}
		if t.Mirror() != st.Mirror {
			t.setMirror(st.Mirror)
		}
	}
	if changed {
		m.changedLocked()
	}
	return gone, errors.Join(errs...)
}
