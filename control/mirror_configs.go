package control

import (
	"errors"
	"fmt"
	"maps"

	"github.com/kmirror/kmirror/internal/settings"
	"github.com/kmirror/kmirror/state"
)

// The CLUSTER_MIRROR config resource (type 64): DescribeConfigs and
// (Incremental)AlterConfigs on a mirror reach these through the broker.

// errUnknownMirrorConfig marks a config name no mirror has.
var errUnknownMirrorConfig = errors.New("unknown mirror config")

// MirrorConfigs implements broker.MirrorAdmin.
func (c *Plane) MirrorConfigs(name string) (map[string]string, bool) {
	defer c.lockMirror(name)()
	m, err := c.store.GetMirror(name)
	if err != nil {
		return nil, false
	}
	return maps.Clone(m.Configs), true
}

// ValidateMirrorConfig implements broker.MirrorAdmin.
func (c *Plane) ValidateMirrorConfig(name, value string) error {
	mc, ok := mirrorConfigs[name]
	if !ok {
		return fmt.Errorf("%w %q", errUnknownMirrorConfig, name)
	}
	if value != "" {
		return mc.Validate(value)
	}
	return nil
}

// MirrorConfigDef implements broker.MirrorAdmin.
func (c *Plane) MirrorConfigDef(name string) (settings.Def, bool) {
	mc, ok := mirrorConfigs[name]
	return mc.Def, ok
}

// SetMirrorConfigs implements broker.MirrorAdmin: the configs are
// validated as a whole, stored, and the mirror's source client and
// fetchers are recreated with them (SPEC.md section 3); mirroring
// partitions resume from their log ends.
func (c *Plane) SetMirrorConfigs(name string, configs map[string]string) error {
	defer c.lockStops(name)() // not in the middle of a stop's final sync (locks.go)
	defer c.lockMirror(name)()
	m, err := c.store.GetMirror(name)
	if err != nil {
		return fmt.Errorf("no cluster mirror %s", name)
	}
	if err := validateMirrorConfigs(configs); err != nil {
		return err
	}
	if id, ok := configs["mirror.source.cluster.id"]; ok && id != m.SourceClusterID {
		return fmt.Errorf("mirror.source.cluster.id cannot change (it is %s)", m.SourceClusterID)
	}
	m.Configs = maps.Clone(configs)
	if err := c.store.PutMirror(m); err != nil {
		return err
	}
	c.removeFetchers(name)
	c.dropSource(name)
	if err := c.addFetchers(m); err != nil {
		return err
	}
	states, err := c.store.MirrorPartitionStates(name)
	if err != nil {
		return err
	}
	for _, ps := range states {
		if fetchingState(ps.State) && m.Topics[ps.Topic] != state.StatePaused {
			if err := c.startPartition(m, ps.Topic, ps.Partition); err != nil {
				return fmt.Errorf("restarting %s-%d: %w", ps.Topic, ps.Partition, err)
			}
		}
	}
	c.log.Info("cluster mirror configs changed", "mirror", name)
	return nil
}
